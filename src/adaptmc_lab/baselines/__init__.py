"""Baselines the bench and the experiments compare with: one NUTS driver (BlackJAX; NumPyro
optional), `adaptmc_lab.baselines.nuts`."""

from adaptmc_lab.baselines.nuts import NutsProgram, NutsResult, compile_nuts, numpyro_nuts, nuts

__all__ = ["NutsProgram", "NutsResult", "compile_nuts", "nuts", "numpyro_nuts"]
