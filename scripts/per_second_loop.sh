#!/usr/bin/env bash
# Per second from a fresh process, cold and warm, for each target given and each sampler of
# $SAMPLERS (default: adaptmc's default, nutpie low-rank, BlackJAX NUTS): for every
# (target, sampler) an empty compile-cache folder, `scripts/per_second.py` in a new process
# (cold), then again with that folder filled (warm). One JSON line per cell on stdout, with
# "pass" (cold or warm), the load average and the UTC time; a cell that fails or runs past
# $CELL_TIMEOUT seconds (default 300) prints {"failed": its exit status} (124: timed out).
# The cells of one target run back to back, so their ratios share the machine's state.
# BENCHMARKS "Per second ..." has the tables (`scripts/per_second_table.py`).
#   bash scripts/per_second_loop.sh stan-arK-arK pdb-arK-arK > runs/per_second.jsonl
set -uo pipefail
cd "$(dirname "$0")/.."
SAMPLERS=${SAMPLERS:-"adaptmc-adaptive-hmc nutpie-low-rank blackjax-nuts"}
CELL_TIMEOUT=${CELL_TIMEOUT:-300}
PY=${PYTHON:-.venv/bin/python}
for target in "$@"; do
  for sampler in $SAMPLERS; do
    cache=$(mktemp -d)
    for pass in cold warm; do
      load=$(cut -d' ' -f1 /proc/loadavg)
      when=$(date -u +%H:%M:%S)
      ADAPTMC_COMPILE_CACHE=$cache PYTHONPATH=src timeout "$CELL_TIMEOUT" \
        "$PY" scripts/per_second.py "$target" "$sampler" 1 > "$cache.out" 2>/dev/null
      rc=$?
      line=$(tail -1 "$cache.out")
      if [[ "$line" != \{* ]]; then  # rc 124: past $CELL_TIMEOUT
        line="{\"target\": \"$target\", \"sampler\": \"$sampler\", \"failed\": $rc}"
      fi
      echo "${line%\}}, \"pass\": \"$pass\", \"load\": $load, \"utc\": \"$when\"}"
    done
    rm -rf "$cache" "$cache.out"
  done
done
