"""Stan programs as targets: ``stan_target("model.stan", data)``.

Needs ``httpstan`` (``pip install 'adaptmc[stan]'``: stanc and the Stan headers) and a C++
compiler; nothing here is imported unless a ``.stan`` target is asked for.
"""

from adaptmc.targets.stan.build import StanBuildError, build_model, cache_dir
from adaptmc.targets.stan.model import StanModel, data_json, stan_name
from adaptmc.targets.stan.target import stan_constrain, stan_logdensity, stan_target

__all__ = [
    "StanBuildError",
    "StanModel",
    "build_model",
    "cache_dir",
    "data_json",
    "stan_constrain",
    "stan_logdensity",
    "stan_name",
    "stan_target",
]
