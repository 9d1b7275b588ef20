#!/usr/bin/env bash
# Run baracuda-bench and the PyTorch baseline on the same GPU and print the
# comparison table (op, dtype, shape, ours ms, torch ms, speed-up, fraction
# of the measured ceiling).
#
#   scripts/bench-vs-torch.sh [FAMILY...]   on the GPU machine, after
#                                           `scripts/gpu-test.sh pack` here
# Writes ours.jsonl, torch.jsonl and table.md to $OUT (or /tmp), and which
# cuBLASLt and cuDNN builds each side ran to libraries.txt. With
# BARACUDA_BENCH_SAME_LIBS=1 our side loads the cuBLASLt and cuDNN files
# PyTorch bundles (through LD_LIBRARY_PATH), so both sides run the same
# library builds and the table compares choices, not builds.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-/tmp}
: > "$out/ours.jsonl"
: > "$out/torch.jsonl"
: > "$out/libraries.txt"
: > "$out/ours.err"
: > "$out/torch.err"
if [ "${BARACUDA_BENCH_SAME_LIBS:-0}" = 1 ]; then
  # cudarc asks the loader for the unversioned name (libcudnn.so) first, which
  # the system's development symlinks would answer; so link PyTorch's files
  # under every name in a directory searched before anything else, and put
  # their own directories (cuDNN's engine sub-libraries) right after it.
  links=$(mktemp -d)
  dirs=$links
  while read -r lib; do
    base=$(basename "$lib")
    stem=${base%%.so*}.so
    ln -sf "$lib" "$links/$stem"
    ln -sf "$lib" "$links/$base"
    dirs="$dirs:$(dirname "$lib")"
  done < <(python3 bench/torch_baseline.py --libs)
  export LD_LIBRARY_PATH="$dirs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
# Alternating rounds (ours, torch, ours, torch; BARACUDA_BENCH_ROUNDS, 2 by
# default): clocks and power state drift over a run, so each side gets the
# same chances; compare.py keeps each side's fastest time.
for round in $(seq "${BARACUDA_BENCH_ROUNDS:-2}"); do
  ./gpu-pack/baracuda-bench "$@" 2> >(tee -a "$out/ours.err" >&2) | tee -a "$out/ours.jsonl"
  python3 bench/torch_baseline.py "$@" 2> >(tee -a "$out/torch.err" >&2) | tee -a "$out/torch.jsonl"
done
grep -h -e '^baracuda-bench: cu' -e '^torch_baseline: torch' "$out/ours.err" "$out/torch.err" |
  sort -u > "$out/libraries.txt" || true
python3 bench/compare.py "$out/ours.jsonl" "$out/torch.jsonl" | tee "$out/table.md"
