#!/usr/bin/env bash
# Compile seconds and wall of `adaptmc sample` (the README's recipe) on each target, run
# twice in fresh processes with a fresh compilation cache: the first run compiles and
# stores, the second loads (issue 14). Usage: bash scripts/compile_cache_runs.sh TARGET...
set -euo pipefail
cache=$(mktemp -d)
trap 'rm -rf "$cache"' EXIT
echo "| target | first run: wall s (compile s) | second run: wall s (compile s) | same draws |"
echo "|---|---|---|---|"
for target in "$@"; do
  cells=()
  for run in 1 2; do
    line=$(ADAPTMC_COMPILE_CACHE="$cache" adaptmc sample --target "$target" \
      --out "runs/cache-$target-$run" --force --no-progress 2>/dev/null | grep -o "wall .*")
    cells+=("$(echo "$line" | sed -E 's/wall ([0-9.]+) s \(compile ([0-9.]+) s\)/\1 (\2)/')")
  done
  same=$(python - "$target" <<'PY'
import sys, arviz as az, numpy as np
a, b = (az.from_netcdf(f"runs/cache-{sys.argv[1]}-{i}/draws.nc") for i in (1, 2))
print("yes" if all(np.array_equal(a.posterior[v].values, b.posterior[v].values)
                   for v in a.posterior.data_vars) else "NO")
PY
)
  echo "| $target | ${cells[0]} | ${cells[1]} | $same |"
done
