#!/usr/bin/env bash
# Build the GPU test binary, the bench binary, the quickstart and the
# `baracuda` command (`gpu-pack/baracuda doctor`) here, or run the GPU tests
# on a GPU machine.
#
#   scripts/gpu-test.sh pack          build (release), strip, copy into gpu-pack/
#   scripts/gpu-test.sh run [FILTER]  on the GPU machine: run every GPU test
#                                     (--ignored), log to $OUT/gpu-test.log when
#                                     $OUT is set, print "N passed, M failed" last
#   scripts/gpu-test.sh               pack, then run (a machine with both)
#
# With the device tool: `scripts/gpu-test.sh pack` here, then run
# `scripts/gpu-test.sh run` there with carry ["gpu-pack"].
set -euo pipefail
cd "$(dirname "$0")/.."
PACK=gpu-pack

# Build the baracuda-kernels test target $1 (release) and copy it to $PACK/$2.
pack_test() {
  local exe
  exe=$(cargo test --release -p baracuda-kernels --test "$1" --no-run --message-format=json 2>/dev/null |
    grep -o '"executable":"[^"]*"' | sed 's/"executable":"//; s/"$//' | tail -n 1)
  [ -n "$exe" ] || { echo "gpu-test.sh: could not build the test binary $1" >&2; exit 1; }
  cp "$exe" "$PACK/$2"
}

pack() {
  mkdir -p "$PACK"
  pack_test gpu kernels-gpu
  pack_test dlpack_gpu dlpack-gpu
  cargo build --release -p baracuda-bench
  local target=${CARGO_TARGET_DIR:-target}
  cp "$target/release/baracuda-bench" "$PACK/baracuda-bench"
  cargo build --release -p baracuda-kernels --example quickstart
  cp "$target/release/examples/quickstart" "$PACK/quickstart"
  cargo build --release -p baracuda-cli
  cp "$target/release/baracuda" "$PACK/baracuda"
  strip "$PACK"/* 2>/dev/null || true
  du -sh "$PACK"
}

run() {
  local log=${OUT:-/tmp}/gpu-test.log
  # Tests run in parallel (the host-side reference checks dominate); the
  # JIT cache test counts process-wide compiles, so it runs alone after.
  local jit=driver::jit_compiles_once_and_caches_on_disk
  set +e
  "./$PACK/kernels-gpu" --ignored --test-threads=8 --skip "$jit" "$@" 2>&1 | tee "$log"
  local status=${PIPESTATUS[0]}
  if [ $# -eq 0 ]; then
    "./$PACK/kernels-gpu" --ignored --exact "$jit" --nocapture 2>&1 | tee -a "$log"
    [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
    "./$PACK/dlpack-gpu" --ignored 2>&1 | tee -a "$log"
    [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
  fi
  set -e
  local passed failed
  passed=$(grep -o '[0-9]* passed' "$log" | awk '{s+=$1} END {print s+0}')
  failed=$(grep -o '[0-9]* failed' "$log" | awk '{s+=$1} END {print s+0}')
  echo
  grep -E '^test .* FAILED$' "$log" || true
  echo "${passed} passed, ${failed} failed"
  return "$status"
}

case "${1:-all}" in
  pack) pack ;;
  run) shift; run "$@" ;;
  all) pack; run ;;
  *) echo "usage: $0 [pack|run [FILTER]]" >&2; exit 2 ;;
esac
