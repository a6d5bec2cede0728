#!/bin/bash
# Cold and warm compile census, base (a source tree) against this branch, alternating.
# usage: scripts/census_pairs.sh BASE_SRC REPS TARGET...  (prints load beside each run)
base=$1; reps=$2; shift 2
py=/work/main/.venv/bin/python
for rep in $(seq "$reps"); do
  for target in "$@"; do
    for side in base new; do
      src=$PWD/src; [ "$side" = base ] && src=$base
      cache=$(mktemp -d)
      for state in cold warm; do
        load=$(cut -d' ' -f1-3 /proc/loadavg)
        out=$(ADAPTMC_COMPILE_CACHE=$cache PYTHONPATH=$src $py scripts/compile_census_bench.py \
              "$target" adaptmc-adaptive-hmc 2>/dev/null)
        echo "$rep $target $side $state load [$load] $(echo "$out" | grep '^call') \
total $(echo "$out" | grep '^total' | cut -d' ' -f2) map $(echo "$out" | grep -E '^(map|nuts_chunk) ' | head -1 | cut -c42-)"
      done
      rm -rf "$cache"
    done
  done
done
