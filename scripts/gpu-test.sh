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
#                                     under compute-sanitizer, every tool
#                                     (memcheck, racecheck, initcheck,
#                                     synccheck; SANITIZE_TOOLS picks a
#                                     subset) with the tests split into
#                                     shards run in parallel (SANITIZE_SHARDS,
#                                     SANITIZE_TIMEOUT bounds each shard in
#                                     seconds), logs under $OUT/sanitize/,
#                                     print "sanitize: memcheck N errors
#                                     (...); ..." last
#   scripts/gpu-test.sh               pack, then run (a machine with both)
#
# The sanitizer passes leave out the tests that allocate tens of GB (past
# 2^31 elements, out of memory), spawn child processes, or repeat the table
# from many threads (the row tests run every kernel anyway), and the JIT
# cache test. They pass --report-api-errors no: a CUDA call that fails on
# purpose (an allocation beyond memory, a library probing what the device
# supports) returns its status to the caller, which the driver turns into an
# Error that the tests check. cuDNN's Hopper implicit-GEMM dgrad and
# fused-attention kernels synchronise through mbarriers, TMA and named
# barriers of part of a block, which racecheck reports as shared-memory
# races and synccheck as divergent barriers. synccheck leaves cuDNN's
# kernels out (--kernel-name-exclude kns=cudnn): its report aborts the
# kernel and poisons the context for every later test of the process.
# racecheck checks them (left out, they fault under it) and counts the
# hazards inside cuDNN's kernels apart from ours: only ours are errors.
# memcheck and initcheck check cuDNN's kernels like ours. SANITIZE_EXCLUDE,
# when set, is the kernel filter of every tool instead.
# BARACUDA_TEST_SMALL_ELEMS (the small-sample bound, 65536 by default) and
# BARACUDA_TEST_DTYPES (comma-separated dtypes the rows check, all by
# default) shrink a pass further for racecheck, which slows kernels with
# shared memory the most.
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

# Every GPU test under every tool. The tests (less the skipped ones, and
# only those matching FILTER, an extended regex, when given) are dealt into
# SANITIZE_SHARDS lists per tool (4 by default; racecheck, the slowest, gets
# twice as many), and every shard of every tool runs at once as its own
# sanitized process with one test thread, so a pass takes minutes on a
# machine with many cores. A shard's log is $OUT/sanitize/<tool>.<i>.log.
# Tests that finished ok in a shard that reported no errors (or, cut off,
# printed none) are appended to
# $OUT/sanitize/clean.txt as "tool test" lines; SANITIZE_DONE names such a
# file from an earlier run at the same commit, and its pairs are not run
# again (a bounded pass resumes where the last one stopped).
sanitize() {
  local cs=${COMPUTE_SANITIZER:-/usr/local/cuda/bin/compute-sanitizer}
  local tools=${SANITIZE_TOOLS:-memcheck racecheck initcheck synccheck}
  local dir=${OUT:-/tmp}/sanitize
  local skip='elementwise_64bit_offsets|reliability::binary_past_2_31_elements'
  skip+='|reliability::allocation_beyond_memory_is_out_of_memory|reliability::missing_library'
  skip+='|reliability::operands_on_another_context_are_rejected|reliability::operand_context_child'
  skip+='|reliability::rows_checked_from_sixteen_threads|reliability::plans_shared_by_sixteen_threads'
  skip+='|driver::jit_compiles_once_and_caches_on_disk'
  local exclude bound=()
  [ -z "${SANITIZE_TIMEOUT:-}" ] || bound=(timeout "$SANITIZE_TIMEOUT")
  export BARACUDA_TEST_SMALL=1
  mkdir -p "$dir"
  "./$PACK/kernels-gpu" --list --ignored 2>/dev/null | sed -n 's/: test$//p' |
    grep -Ev "^($skip)" | grep -E "${1:-.}" >"$dir/all.txt" || true
  echo "== $(wc -l <"$dir/all.txt") tests under: $tools"
  local tool i n todo
  for tool in $tools; do
    todo="$dir/$tool.todo"
    if [ -n "${SANITIZE_DONE:-}" ] && [ -f "$SANITIZE_DONE" ]; then
      grep -Fxv -f <(sed -n "s/^$tool //p" "$SANITIZE_DONE"; echo '#') "$dir/all.txt" >"$todo" || true
    else
      cp "$dir/all.txt" "$todo"
    fi
    exclude=()
    if [ -n "${SANITIZE_EXCLUDE:-}" ]; then
      exclude=(--kernel-name-exclude "$SANITIZE_EXCLUDE")
    elif [ "$tool" = synccheck ]; then
      exclude=(--kernel-name-exclude kns=cudnn)
    fi
    n=${SANITIZE_SHARDS:-4}
    [ "$tool" = racecheck ] && n=$((2 * n))
    for i in $(seq 0 $((n - 1))); do
      awk -v n="$n" -v i="$i" 'NR % n == i' "$todo" >"$dir/$tool.$i.list"
      [ -s "$dir/$tool.$i.list" ] || continue
      (
        set +e
        "${bound[@]}" "$cs" --tool "$tool" --print-limit 20 --report-api-errors no "${exclude[@]}" \
          "./$PACK/kernels-gpu" --ignored --test-threads=1 --exact $(cat "$dir/$tool.$i.list") \
          >"$dir/$tool.$i.log" 2>&1
        echo "exit $?" >>"$dir/$tool.$i.log"
      ) &
    done
  done
  wait
  sanitize_summary "$dir" $tools
}

# The summary of the shard logs under $1 for the tools $2...: appends the
# clean pairs to $1/clean.txt, prints the hazards of our kernels and the
# "sanitize:" line, and fails unless every tool is clean and finished.
sanitize_summary() {
  local dir=$1 tool
  shift
  local summary=() status=0 log errors total ok failed unfinished library lib
  touch "$dir/clean.txt"
  for tool in "$@"; do
    total=0 ok=0 failed=0 unfinished=0 library=0
    for log in "$dir/$tool".*.log; do
      [ -f "$log" ] || continue
      errors=$(sanitizer_errors "$log")
      if [ "$tool" = racecheck ]; then
        # each hazard's first line names the kernel: count cuDNN's apart
        lib=$(grep -E '^========= +(Error|Warning): ' "$log" | grep -c cudnn || true)
        library=$((library + lib))
        [ "$errors" = "?" ] || errors=$(grep -E '^========= +(Error|Warning): ' "$log" | grep -vc cudnn || true)
      fi
      if [ "$errors" = "?" ]; then
        unfinished=$((unfinished + 1))
        # a cut-off shard: count the hazards printed so far
        errors=$(grep -E '^========= +(Invalid|Uninitialized|Barrier|Race|Error|Warning)' "$log" |
          { if [ "$tool" = racecheck ]; then grep -vc cudnn; else grep -c .; fi; } || true)
      fi
      [ "$errors" -ne 0 ] || sed -n "s/^test \(.*\) \.\.\. ok$/$tool \1/p" "$log" >>"$dir/clean.txt"
      total=$((total + errors))
      ok=$((ok + $(grep -c '^test .* ok$' "$log" || true)))
      failed=$((failed + $(grep -c '^test .* FAILED$' "$log" || true)))
    done
    [ "$total" -eq 0 ] && [ "$failed" -eq 0 ] && [ "$unfinished" -eq 0 ] || status=1
    summary+=("$tool $total errors ($ok tests ok of $(wc -l <"$dir/$tool.todo"), $failed failed, $unfinished shards cut off$([ "$tool" != racecheck ] || echo ", $library hazards in cuDNN's kernels"))")
  done
  grep -h -B2 -A10 -E '^========= +(Invalid|Uninitialized|Barrier|Race|Error|Internal)' "$dir"/*.log |
    grep -v 'cudnn' | head -80 || true
  local line
  line=$(printf '%s; ' "${summary[@]}")
  echo "sanitize: ${line%; }"
  return "$status"
}

case "${1:-all}" in
  pack) pack ;;
  run) shift; run "$@" ;;
  sanitize) shift; sanitize "$@" ;;
  all) pack; run ;;
  *) echo "usage: $0 [pack|run [FILTER]|sanitize [FILTER]]" >&2; exit 2 ;;
esac
