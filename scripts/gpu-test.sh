#!/usr/bin/env bash
# Build the GPU test binary, the bench binary, the quickstart and the
# `baracuda` command (`gpu-pack/baracuda doctor`) here, or run the GPU tests
# on a GPU machine.
#
#   scripts/gpu-test.sh pack          build (release), strip, copy into gpu-pack/
#   scripts/gpu-test.sh run [FILTER]  on the GPU machine: run every GPU test
#                                     (--ignored; GPU_TEST_THREADS at once, 8
#                                     by default), log to $OUT/gpu-test.log when
#                                     $OUT is set, print "N passed, M failed" last
#   scripts/gpu-test.sh sanitize [FILTER]
#                                     on the GPU machine: run the GPU tests in
#                                     small-shapes mode (BARACUDA_TEST_SMALL=1)
#                                     under compute-sanitizer, once per tool
#                                     (memcheck, racecheck, initcheck,
#                                     synccheck; SANITIZE_TOOLS picks a
#                                     subset, SANITIZE_TIMEOUT bounds each
#                                     pass in seconds), logs to
#                                     $OUT/sanitize-<tool>.log,
#                                     print "sanitize: memcheck N errors, ..."
#                                     last
#   scripts/gpu-test.sh               pack, then run (a machine with both)
#
# The sanitizer passes leave out the tests that allocate tens of GB (past
# 2^31 elements, out of memory), spawn child processes, or repeat the table
# from many threads (the row tests run every kernel anyway), and the JIT
# cache test. They pass --report-api-errors no: a CUDA call that fails on
# purpose (an allocation beyond memory, a library probing what the device
# supports) returns its status to the caller, which the driver turns into an
# Error that the tests check. SANITIZE_EXCLUDE, when set, is passed as
# --kernel-name-exclude (for example kns=cudnn to leave out library kernels
# whose reports cannot be fixed here); it is empty by default.
# BARACUDA_TEST_SMALL_ELEMS (the small-sample bound, 65536 by default) and
# BARACUDA_TEST_DTYPES (comma-separated dtypes the rows check, all by
# default) shrink a pass further for racecheck, which slows kernels with
# shared memory the most; SANITIZE_THREADS sets the test threads (8 by
# default; racecheck tracks launches from one thread more reliably).
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
  "./$PACK/kernels-gpu" --ignored --test-threads="${GPU_TEST_THREADS:-8}" --skip "$jit" "$@" 2>&1 | tee "$log"
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

# Sum of the errors a compute-sanitizer log reports ("ERROR SUMMARY: N
# errors"; racecheck's "RACECHECK SUMMARY: ... (N errors, ...)"), or "?"
# when it reports none (the run did not finish).
sanitizer_errors() {
  local n
  n=$(grep -o 'ERROR SUMMARY: [0-9]* error' "$1" | awk '{s+=$3} END {if (NR) print s}')
  [ -n "$n" ] || n=$(grep -o '([0-9]* errors' "$1" | tr -d '(' | awk '{s+=$1} END {if (NR) print s}')
  echo "${n:-?}"
}

sanitize() {
  local cs=${COMPUTE_SANITIZER:-/usr/local/cuda/bin/compute-sanitizer}
  local tools=${SANITIZE_TOOLS:-memcheck racecheck initcheck synccheck}
  local dir=${OUT:-/tmp}
  local skip=(--skip elementwise_64bit_offsets
    --skip reliability::binary_past_2_31_elements
    --skip reliability::allocation_beyond_memory_is_out_of_memory
    --skip reliability::missing_library
    --skip reliability::operands_on_another_context_are_rejected
    --skip reliability::rows_checked_from_sixteen_threads
    --skip reliability::plans_shared_by_sixteen_threads
    --skip driver::jit_compiles_once_and_caches_on_disk)
  local exclude=() bound=()
  [ -z "${SANITIZE_EXCLUDE:-}" ] || exclude=(--kernel-name-exclude "$SANITIZE_EXCLUDE")
  [ -z "${SANITIZE_TIMEOUT:-}" ] || bound=(timeout "$SANITIZE_TIMEOUT")
  export BARACUDA_TEST_SMALL=1
  local summary=() status=0 tool log rc errors
  for tool in $tools; do
    log="$dir/sanitize-$tool.log"
    echo "== compute-sanitizer --tool $tool (log: $log)"
    set +e
    "${bound[@]}" "$cs" --tool "$tool" --error-exitcode 99 --print-limit 50 --report-api-errors no \
      "${exclude[@]}" "./$PACK/kernels-gpu" --ignored --test-threads="${SANITIZE_THREADS:-8}" "${skip[@]}" "$@" \
      >"$log" 2>&1
    rc=$?
    set -e
    grep -E '^test result|^test .* FAILED$|ERROR SUMMARY|RACECHECK SUMMARY' "$log" || true
    errors=$(sanitizer_errors "$log")
    [ "$rc" -eq 0 ] && [ "$errors" = 0 ] || status=1
    summary+=("$tool $errors errors")
  done
  local line
  line=$(printf '%s, ' "${summary[@]}")
  echo "sanitize: ${line%, }"
  return "$status"
}

case "${1:-all}" in
  pack) pack ;;
  run) shift; run "$@" ;;
  sanitize) shift; sanitize "$@" ;;
  all) pack; run ;;
  *) echo "usage: $0 [pack|run [FILTER]|sanitize [FILTER]]" >&2; exit 2 ;;
esac
