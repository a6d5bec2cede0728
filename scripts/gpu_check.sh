#!/bin/bash
# GPU check: adaptmc on an NVIDIA GPU (JAX's default backend), no Stan (httpstan has no 3.12 wheel)
# wheels the GPU image lacks (arviz, blackjax, dask, h5netcdf, xarray-einstats, partd, locket,
# platformdirs) go in .whl/ (pip download --python-version 3.12 --only-binary=:all: --no-deps)
set -o pipefail
[ -d .whl ] && { python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1; }
mkdir -p ${OUT:-runs/gpu}
export PYTHONPATH=/tmp/site:$PWD/src XLA_PYTHON_CLIENT_PREALLOCATE=false PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total --format=csv
python3 -c "import jax, numpyro, blackjax, arviz; print('jax', jax.__version__, jax.devices(), 'numpyro', numpyro.__version__)"
echo "== main job (README's first command) on the GPU"
/usr/bin/time -f "wall %e s" python3 -m adaptmc sample --target neal-100d --out ${OUT:-runs/gpu}/demo --force 2>&1 | tee ${OUT:-runs/gpu}/demo.log | tail -40
python3 - <<'PY' 2>&1 | tee -a ${OUT:-runs/gpu}/demo.log
import time, jax, numpy as np, adaptmc
for chains in (4, 64):
    t = time.perf_counter()
    idata = adaptmc.sample("std-normal-10d", chains=chains, seed=0, progress=False)
    x = idata.posterior["x"].values
    print(chains, "chains: wall", round(time.perf_counter() - t, 1), "s; dtype", x.dtype,
          "; mean|x| max", float(np.abs(x.mean((0, 1))).max()), "; var", np.round(x.var((0, 1)), 2)[:4],
          "; device", jax.devices()[0].platform)
PY
echo "== fast test tier on the GPU"
timeout 250 python3 -m pytest -v -n 14 -p no:cacheprovider -p no:benchmark -o addopts="" -m "not slow" tests > ${OUT:-runs/gpu}/tests.log 2>&1
grep -E "FAILED|ERROR" ${OUT:-runs/gpu}/tests.log; grep -c PASSED ${OUT:-runs/gpu}/tests.log
