#!/usr/bin/env bash
# Run baracuda-bench and the PyTorch baseline on the same GPU and print the
# comparison table (op, dtype, shape, ours ms, torch ms, speed-up, fraction
# of the measured ceiling).
#
#   scripts/bench-vs-torch.sh [FAMILY...]   on the GPU machine, after
#                                           `scripts/gpu-test.sh pack` here
# Writes ours.jsonl, torch.jsonl and table.md to $OUT (or /tmp).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-/tmp}
: > "$out/ours.jsonl"
: > "$out/torch.jsonl"
# Two alternating rounds (ours, torch, ours, torch): clocks and power state
# drift over a run, so each side gets the same chances; compare.py keeps the
# faster of each side's two times.
for round in 1 2; do
  ./gpu-pack/baracuda-bench "$@" | tee -a "$out/ours.jsonl"
  python3 bench/torch_baseline.py "$@" | tee -a "$out/torch.jsonl"
done
python3 bench/compare.py "$out/ours.jsonl" "$out/torch.jsonl" | tee "$out/table.md"
