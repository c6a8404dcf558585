#!/usr/bin/env bash
# CI's fuzzing job: each libFuzzer target (fuzz/) runs for a bounded time, seeded from its
# committed corpus (fuzz/corpus/<target>/), under AddressSanitizer + UndefinedBehaviorSanitizer.
# New inputs go to a scratch corpus in the build tree, never into the repository; a crash
# leaves its input in build-asan/fuzz/artifacts/ and fails the job (add it to the corpus
# with the fix). Prints one summary line per target.
# Environment: FUZZ_SECONDS (per target; default 60), JOBS (build parallelism).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/sanitizer-env.sh
seconds=${FUZZ_SECONDS:-60}
jobs=${JOBS:-$(nproc)}
targets=(config schema validate)

# The sanitizer job's tree (scripts/ci-sanitizers.sh); configured here too, so this runs alone.
cmake -S . -B build-asan -G Ninja -DCMAKE_CXX_COMPILER=clang++ \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDELTAKERN_WITH_CUDA=OFF -DDELTAKERN_BUILD_BENCH=OFF \
  -DDELTAKERN_SANITIZE=address,undefined -DDELTAKERN_BUILD_FUZZERS=ON >/dev/null
cmake --build build-asan -j "$jobs" --target "${targets[@]/#/fuzz_}"

status=0
summary=()
for target in "${targets[@]}"; do
  work=build-asan/fuzz/work/$target
  artifacts=build-asan/fuzz/artifacts
  rm -rf "$work" && mkdir -p "$work" "$artifacts"
  seeds=$(find "fuzz/corpus/$target" -type f | wc -l)
  dict=()
  [ -f "fuzz/$target.dict" ] && dict=(-dict="fuzz/$target.dict")
  rc=0
  # The scratch corpus first: libFuzzer writes new inputs to the first directory it is given.
  "build-asan/fuzz/fuzz_$target" "$work" "fuzz/corpus/$target" "${dict[@]}" -max_total_time="$seconds" \
    -timeout=10 -rss_limit_mb=2048 -max_len=4096 -print_final_stats=1 -artifact_prefix="$artifacts/$target-" \
    >"build-asan/fuzz/$target.log" 2>&1 || rc=$?
  runs=$(grep -Eo 'stat::number_of_executed_units: [0-9]+' "build-asan/fuzz/$target.log" | grep -Eo '[0-9]+$' || echo 0)
  found=$(find "$work" -type f | wc -l)
  if [ $rc -eq 0 ]; then
    verdict="no crash"
  else
    verdict="FAILED (exit $rc; log build-asan/fuzz/$target.log)"
    status=1
    tail -n 40 "build-asan/fuzz/$target.log"
  fi
  summary+=("fuzz: $target: $runs executions in ${seconds} s, $seeds seeds + $found new inputs, $verdict")
done
printf '%s\n' "${summary[@]}"
exit $status
