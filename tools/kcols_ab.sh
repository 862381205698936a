#!/bin/bash
# Alternated A/B of two `kcols` builds (backends/cpu/examples/kcols.rs) on the issue-3 n = 4
# shapes: for each round, shape and thread count, base then branch, 10 calls each for n = 1
# and n = 4; raw lines (prefixed `base` / `branch`, `#` lines with time and load) to OUT.
# Summarize with tools/kcols_ab_minima.py OUT [OUT.json].
# Usage: tools/kcols_ab.sh BASE_KCOLS BRANCH_KCOLS ROUNDS OUT [FORMATS]
set -eu
base=$1 branch=$2 rounds=$3 out=$4
formats=${5:-ROCMFP2,ROCMFP3,TQ2_0,PQ2_0,Q4_0,Q4_K,Q6_K,Q8_0}
nice="nice -n -20"
$nice true 2>/dev/null || nice=""
for r in $(seq 1 "$rounds"); do
  for s in 4096x14336 14336x4096; do
    for t in 1 2; do
      for side in base branch; do
        bin=$base
        [ "$side" = branch ] && bin=$branch
        echo "# round $r $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg)" >> "$out"
        $nice "$bin" "$formats" 10 "$s" "$t" 1,4 2>&1 | sed "s|^|$side |" >> "$out"
      done
    done
  done
done
