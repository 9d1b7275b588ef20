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
./gpu-pack/baracuda-bench "$@" | tee "$out/ours.jsonl"
python3 bench/torch_baseline.py "$@" | tee "$out/torch.jsonl"
python3 bench/compare.py "$out/ours.jsonl" "$out/torch.jsonl" | tee "$out/table.md"
