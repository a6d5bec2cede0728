#!/bin/sh
# One run of the comparison in notes/warmup.md: per target, the default recipe before the
# new warm-up (source tree $BEFORE, e.g. `git archive 19bb91e src | tar -x -C $BEFORE`),
# after it, and nutpie diagonal and low-rank; JSON lines to stdout.
set -e
PY=${PY:-/work/venv/bin/python}
for t in "$@"; do
  PYTHONPATH=$BEFORE/src $PY scripts/warmup_vs_nutpie.py "$t" --label before --rows adaptmc
  PYTHONPATH=src $PY scripts/warmup_vs_nutpie.py "$t" --label after \
    --rows adaptmc nutpie-diag nutpie-low-rank
done
