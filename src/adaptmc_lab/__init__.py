"""adaptmc's lab: reproductions of the source papers (`adaptmc_lab.experiments`), the
benchmark against NUTS and nutpie (`adaptmc_lab.bench`, `adaptmc_lab.baselines`), and the
models and data sets only they use (`adaptmc_lab.models`, `adaptmc_lab.datasets`). It depends
on the library `adaptmc`; the library never imports it."""
