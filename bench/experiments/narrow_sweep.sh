#!/usr/bin/env bash
# narrow_sweep.sh [m]: build narrow_sweep.cu for the forward and the data
# gradient (TRANS 0, 1) with 1 or 2 tiles per chunk and 4 or 8 warps per
# block (K, N from the environment, default 64), compiles in parallel, then
# run each binary in turn on the GPU machine. The kernel's defaults are
# tiles 2 (K + N <= 128) and 4 warps.
set -euo pipefail
cd "$(dirname "$0")"
NVCC=${NVCC:-/usr/local/cuda/bin/nvcc}
K=${K:-64}
N=${N:-64}
DT=${DTYPE:-3}
out=$(mktemp -d)
bins=()
for trans in 0 1; do
  for t in 1 2; do
    for w in 4 8; do
      b="$out/narrow_${trans}_${t}_${w}"
      bins+=("$b")
      "$NVCC" -O3 -gencode=arch=compute_90a,code=sm_90a -DDTYPE="$DT" -DNARROW_K="$K" \
        -DNARROW_N="$N" -DTRANS="$trans" -DNARROW_TILES="$t" -DNARROW_WARPS="$w" \
        narrow_sweep.cu -o "$b" &
    done
  done
done
wait
for b in "${bins[@]}"; do "$b" "$@"; done
