#!/usr/bin/env bash
# narrow_sweep.sh [m]: build narrow_sweep.cu for the forward and the data
# gradient (TRANS 0, 1) with 1 or 2 tiles per chunk, 4 or 8 warps per
# block, and the next chunk's loads issued after or before the current
# chunk's math (NARROW_PREFETCH 0, 1); K, N from the environment (default
# 64). Compiles in parallel, then runs each binary in turn on the GPU
# machine. The kernel's defaults: tiles 2 (K + N <= 128), 4 warps, no
# prefetch.
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
      for p in 0 1; do
        b="$out/narrow_${trans}_${t}_${w}_${p}"
        bins+=("$b")
        "$NVCC" -O3 -gencode=arch=compute_90a,code=sm_90a -DBARACUDA_DTYPE="$DT" -I../../../crates/baracuda-kernels/kernels -DNARROW_K="$K" \
          -DNARROW_N="$N" -DTRANS="$trans" -DNARROW_TILES="$t" -DNARROW_WARPS="$w" \
          -DNARROW_PREFETCH="$p" narrow_sweep.cu -o "$b" &
      done
    done
  done
done
wait
for b in "${bins[@]}"; do "$b" "$@"; done
