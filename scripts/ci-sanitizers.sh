#!/usr/bin/env bash
# CI's sanitizer jobs (CPU only, clang 14 from Debian):
#   1. the whole test suite built with AddressSanitizer + UndefinedBehaviorSanitizer
#      (build-asan/; the libFuzzer targets are built in the same tree and their committed
#      corpora replayed as tests, see fuzz/CMakeLists.txt);
#   2. the concurrent-dispatch and call-limits tests (8 threads each) built with ThreadSanitizer
#      (build-tsan/).
# Every target of a tree gets the flags, the plugins the tests dlopen and the CLI they start
# included. Prints one summary line per job; exits non-zero when a job fails.
# Environment: JOBS (build parallelism; default: the number of cores).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/sanitizer-env.sh
jobs=${JOBS:-$(nproc)}
common=(-G Ninja -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo
        -DDELTAKERN_WITH_CUDA=OFF -DDELTAKERN_BUILD_BENCH=OFF)
status=0

# ctest's summary line: "100% tests passed, 0 tests failed out of 12".
summarize() {
  local name=$1 log=$2 seconds=$3 rc=$4
  local line
  line=$(grep -Eo '[0-9]+% tests passed, [0-9]+ tests? failed out of [0-9]+' "$log" | tail -1 || true)
  echo "sanitizers: $name: ${line:-no ctest summary} ($seconds s incl. build; exit $rc)"
}

start=$SECONDS
cmake -S . -B build-asan "${common[@]}" -DDELTAKERN_SANITIZE=address,undefined -DDELTAKERN_BUILD_FUZZERS=ON >/dev/null
cmake --build build-asan -j "$jobs"
rc=0
ctest --test-dir build-asan -LE full --output-on-failure 2>&1 | tee build-asan/ctest.log || rc=$?
asan_line=$(summarize "address+undefined, whole suite" build-asan/ctest.log $((SECONDS - start)) $rc)
[ $rc -eq 0 ] || status=1

start=$SECONDS
cmake -S . -B build-tsan "${common[@]}" -DDELTAKERN_SANITIZE=thread >/dev/null
cmake --build build-tsan -j "$jobs" --target test_concurrent_dispatch test_call_limits
rc=0
ctest --test-dir build-tsan -R '^(test_concurrent_dispatch|test_call_limits)$' --output-on-failure 2>&1 |
  tee build-tsan/ctest.log || rc=$?
tsan_line=$(summarize "thread, concurrent dispatch and call limits" build-tsan/ctest.log $((SECONDS - start)) $rc)
[ $rc -eq 0 ] || status=1

echo "$asan_line"
echo "$tsan_line"
exit $status
