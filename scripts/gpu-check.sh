#!/usr/bin/env bash
# gpu-check.sh: the project's GPU check, in two halves.
#
#   scripts/gpu-check.sh pack   on the build machine (Debian 12's -dev packages, nvcc): builds a
#                               Release tree with CUDA into build-gpu/ and copies what the GPU
#                               machine needs into .carry/ (git-ignored): bin/, lib/ with the
#                               plugins, share/ config, the test-only plugins, and every
#                               non-system shared library they load (lib/deps/).
#   scripts/gpu-check.sh tiers [full|large] [VARIANT...]   on the GPU machine: the supervised
#                               conformance run at that tier on every GPU-machine target at once
#                               (see tiers()), and on native/cuda for each named variant beside them.
#   scripts/gpu-check.sh run    on the GPU machine, from a copy of the repository that holds
#                               .carry/ (no -dev packages, no network needed): nvidia-smi, the
#                               native self-test and the first-call capture (tests/gpu), the unit
#                               and conformance tests on every backend and device, the cut
#                               digests (tests/gpu), bench_gpu,
#                               compute-sanitizer when present, and native_kernel_bench. Logs
#                               and the markdown table go to $OUT (default ./gpu-results); a
#                               summary table ends the output. Every step runs under a time limit
#                               and a failing step does not stop the others.
#   scripts/gpu-check.sh variant NAME   on the build machine, after pack: keeps the native plugin
#                               now built in build-gpu/ as a variant, NAME (xz, about 1.4 MB, in
#                               .carry/variants/; pack keeps them): build one, change a kernel,
#                               build again, pack, and every build runs in one GPU call.
#   scripts/gpu-check.sh compare [ROUNDS] [-- BENCH_GPU_ARGS]   on the GPU machine: bench_gpu on
#                               native (default args: --only serving --backends native) for the
#                               carried build ("main") and every variant, ROUNDS times (default 2)
#                               in turn, then one table of every row side by side
#                               (scripts/bench-compare.py); logs packed in $OUT/compare.tgz.
#                               VARIANTS="a b" takes only those variants (default: every one).
#                               ENVS="VAR=V[,VAR=V] ..." also runs every build under each setting
#                               (the plugin's switches, e.g. DELTAKERN_NATIVE_TILE=512), a column
#                               each, named BUILD@setting without the DELTAKERN_NATIVE_ prefix.
#   scripts/gpu-check.sh profile ROW [VARIANT]   on the GPU machine: Nsight Compute (--set full,
#                               clocks left alone) on one launch of a native kernel in
#                               native_kernel_bench's row ROW (e.g. "chl D8192 T1k 64mix"), of the
#                               carried plugin or of VARIANT's; KERNEL (a regex, default varlen)
#                               and SKIP (launches skipped first, default 2) pick the launch. Prints
#                               scripts/ncu-summary.py's tables (instructions by execution count,
#                               stall reasons, the instructions that stall most); the report and
#                               its pages in $OUT/profile.tgz.
#   scripts/gpu-check.sh python on the GPU machine: the Python package's CUDA half (python_half()):
#                               pytest with torch on CUDA, the per-call cost. Pack for it with
#                               CUDA_RUNTIME=Shared and PY_INCLUDE (that machine's Python headers),
#                               and ACCEL_WHEEL (a deltakern-accel wheel) to serve native from it.
#
# Environment: NVCC (pack; default /usr/local/cuda/bin/nvcc), CUDA_ARCHS (pack; default 90-real,
# enough for the H200), CUDA_RUNTIME (pack; Static or Shared, default Static), JOBS (pack;
# default 2), OUT (run, tiers, python).
set -u

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
carry="$repo/.carry"

die() {
  echo "gpu-check: $*" >&2
  exit 1
}

# ---------------------------------------------------------------------------- pack
pack() {
  set -e
  local build="${BUILD_DIR:-$repo/build-gpu}"
  local nvcc="${NVCC:-/usr/local/cuda/bin/nvcc}"
  [ -x "$nvcc" ] || die "no nvcc at $nvcc (set NVCC)"
  echo "== configure $build (Release, CUDA ${CUDA_ARCHS:-90-real})"
  mkdir -p "$build"
  cmake -G Ninja -S "$repo" -B "$build" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CUDA_COMPILER="$nvcc" -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCHS:-90-real}" \
    -DDELTAKERN_CUDA_RUNTIME="${CUDA_RUNTIME:-Static}" \
    -DDELTAKERN_WITH_CUDA=ON -DDELTAKERN_BUILD_TESTS=ON -DDELTAKERN_BUILD_BENCH=ON >"$build/configure.log" 2>&1 ||
    { tail -30 "$build/configure.log"; die "configure failed"; }
  grep -q "building the CUDA paths" "$build/configure.log" ||
    echo "gpu-check: warning: CUDA was not enabled in $build" >&2
  echo "== build (ninja -j${JOBS:-2})"
  ninja -C "$build" -j"${JOBS:-2}"

  echo "== copy into $carry"
  local kept
  kept=$(mktemp -d)
  [ -d "$carry/variants" ] && mv "$carry/variants" "$kept/"
  rm -rf "$carry"
  mkdir -p "$carry/lib/deps"
  [ -d "$kept/variants" ] && mv "$kept/variants" "$carry/"
  rm -rf "$kept"
  cp -a "$build/bin" "$carry/"
  # libdeltakern, the plugins (lib/deltakern/plugins) and the conformance library, as built,
  # and the helpers beside the plugins: the probe (lib/deltakern/deltakern-probe) and the
  # conformance worker that `deltakern conformance` runs each target's cases in
  # (lib/deltakern/deltakern-conformance-worker).
  (cd "$build/lib" && find . \( -name '*.so' -o -name '*.so.*' -o -name deltakern-probe \
    -o -name deltakern-conformance-worker \) -exec cp -a --parents {} "$carry/lib/" \;)
  [ -x "$carry/lib/deltakern/deltakern-conformance-worker" ] || die "no conformance worker in $build/lib/deltakern"
  [ -d "$build/share" ] && cp -a "$build/share" "$carry/"
  local plugin_dir
  for plugin_dir in plugins hostile-plugins defect-plugins abi-plugins refused-plugins; do
    if [ -d "$build/tests/$plugin_dir" ]; then
      mkdir -p "$carry/tests"
      cp -a "$build/tests/$plugin_dir" "$carry/tests/"
    fi
  done
  # The ctest files (paths inside them are the build tree's: run recreates that path).
  (cd "$build" && find . -name 'CTestTestfile.cmake' -exec cp -a --parents {} "$carry/" \;)
  # The Python extension for the GPU machine's python3 (python), when that machine's Python
  # headers are given (PY_INCLUDE: its sysconfig include dir, fetched from it once). It is built
  # here, by the compiler that built libdeltakern: the C++ API passes std types (strings, paths,
  # vectors), and one built there by that machine's g++ (/opt/gcc) aborted in free() the first
  # time it built a Runtime with plugin files.
  if [ -n "${PY_INCLUDE:-}" ]; then
    local nb
    nb=$(python3 -c "import nanobind, os; print(os.path.dirname(nanobind.__file__))") || die "no nanobind here"
    echo "== the Python extension for $PY_INCLUDE"
    mkdir -p "$carry/python/deltakern"
    g++ -O2 -std=c++20 -fPIC -shared -fvisibility=hidden -DNDEBUG -I"$PY_INCLUDE" -I"$(dirname "$PY_INCLUDE")" -I"$nb/include" \
      -I"$nb/ext/robin_map/include" -I"$repo/core/include" "$repo"/python/src/*.cpp "$nb/src/nb_combined.cpp" \
      -L"$build/lib" -ldeltakern -Wl,-rpath,'$ORIGIN/lib' \
      -o "$carry/python/deltakern/_core${PY_EXT_SUFFIX:-.cpython-312-x86_64-linux-gnu.so}" || die "extension build failed"
  fi

  # Shared libraries the GPU machine lacks (Debian's spdlog, fmt, toml++, Boost.Test, benchmark).
  # The C runtime, libstdc++ and the driver stay the GPU machine's own.
  local elf
  # The deltakern-accel wheel (ACCEL_WHEEL, from `pip wheel ./python/accel`): python_half
  # installs it the way pip does and native is served from it.
  if [ -n "${ACCEL_WHEEL:-}" ]; then
    mkdir -p "$carry/wheels" && cp "$ACCEL_WHEEL" "$carry/wheels/" || die "no wheel at $ACCEL_WHEEL"
  fi
  find "$carry/bin" "$carry/lib" "$carry/tests" -type f \( -perm -u+x -o -name '*.so*' \) -print0 |
    while IFS= read -r -d '' elf; do
      file -b "$elf" 2>/dev/null | grep -q ELF || continue
      ldd "$elf" 2>/dev/null | awk '/=> \// {print $3}'
    done | sort -u | while read -r lib; do
      case "$(basename "$lib")" in
        linux-vdso* | ld-linux* | libc.so* | libm.so* | libdl.so* | libpthread.so* | librt.so* | libresolv.so* | \
          libutil.so* | libgcc_s.so* | libstdc++.so* | libcuda.so* | libnvidia* | libdeltakern*) continue ;;
      esac
      [[ "$lib" == "$carry"* ]] && continue
      cp -L "$lib" "$carry/lib/deps/"
    done
  echo "$build" >"$carry/BUILD_PATH"
  echo "$repo" >"$carry/SOURCE_PATH"
  git -C "$repo" rev-parse HEAD >"$carry/GIT_REV" 2>/dev/null || true
  du -sh "$carry"
  echo "deps: $(ls "$carry/lib/deps" | tr '\n' ' ')"
  echo "pack done: carry .carry to the GPU machine and run: scripts/gpu-check.sh run"
}

# The test programs carry the build tree's absolute paths (plugin dirs, RPATH, source dir):
# recreate them as links to this copy when they do not exist here.
link_build_paths() {
  local build_path source_path
  build_path=$(cat "$carry/BUILD_PATH" 2>/dev/null || true)
  source_path=$(cat "$carry/SOURCE_PATH" 2>/dev/null || true)
  if [ -n "$source_path" ] && [ ! -e "$source_path" ]; then
    mkdir -p "$(dirname "$source_path")" && ln -sfn "$repo" "$source_path" || echo "gpu-check: cannot link $source_path"
  fi
  if [ -n "$build_path" ] && [ ! -e "$build_path" ]; then
    mkdir -p "$(dirname "$build_path")" && ln -sfn "$carry" "$build_path" || echo "gpu-check: cannot link $build_path"
  fi
  export LD_LIBRARY_PATH="$carry/lib:$carry/lib/deps${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  unset DELTAKERN_BACKEND DELTAKERN_CONFIG DELTAKERN_PLUGIN_PATH
}

# ---------------------------------------------------------------------------- run
declare -a step_names=() step_status=() step_secs=()

# step NAME LIMIT_S CMD...: runs CMD with a time limit; its output goes to one log,
# $OUT/gpu-check.log (the GPU machine hands back few files), and its tail to the screen.
step() {
  local name="$1" limit="$2"
  shift 2
  local part="$OUT/.step.log" t0 rc
  echo "== $name"
  t0=$(date +%s)
  timeout --kill-after=10 "$limit" "$@" >"$part" 2>&1
  rc=$?
  local secs=$(($(date +%s) - t0))
  local status="ok"
  if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
    status="TIMEOUT (${limit}s)"
  elif [ $rc -ne 0 ]; then
    status="FAIL (rc $rc)"
  fi
  tail -n 12 "$part"
  echo "-- $name: $status in ${secs}s"
  {
    echo "==================== $name: $status in ${secs}s"
    echo "\$ $*"
    cat "$part"
  } >>"$OUT/gpu-check.log"
  rm -f "$part"
  step_names+=("$name")
  step_status+=("$status")
  step_secs+=("$secs")
}

# The steps' table (on screen and in $OUT/summary.txt); returns the number of failed steps.
summary() {
  echo
  echo "== summary (log: $OUT/gpu-check.log)"
  local i failed=0
  {
    printf '%-52s %-22s %6s\n' "step" "status" "secs"
    for i in "${!step_names[@]}"; do
      printf '%-52s %-22s %6s\n' "${step_names[$i]}" "${step_status[$i]}" "${step_secs[$i]}"
    done
  } | tee "$OUT/summary.txt"
  for i in "${!step_status[@]}"; do
    case "${step_status[$i]}" in ok | skipped*) ;; *) failed=$((failed + 1)) ;; esac
  done
  return $failed
}

# Optional steps run only while the whole check stays well inside ten minutes.
start_time=$(date +%s)
budget_left() { echo $((${GPU_CHECK_BUDGET_S:-540} - ($(date +%s) - start_time))); }

skip() {
  echo "== $1: skipped ($2)"
  step_names+=("$1")
  step_status+=("skipped: $2")
  step_secs+=("0")
}

run() {
  OUT="${OUT:-$PWD/gpu-results}"
  mkdir -p "$OUT"
  OUT=$(cd "$OUT" && pwd)
  : >"$OUT/gpu-check.log"
  [ -d "$carry/bin" ] || die "no $carry/bin: run 'scripts/gpu-check.sh pack' on the build machine first"

  link_build_paths
  local bin="$carry/bin" native="$carry/lib/deltakern/plugins/libdeltakern_native.so"

  echo "GPU: $(nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader 2>&1 | head -1)"
  echo "carried build: $(cat "$carry/GIT_REV" 2>/dev/null || echo '?')"
  step "nvidia-smi" 30 nvidia-smi
  [ -x "$bin/deltakern" ] && step "deltakern list" 60 "$bin/deltakern" list
  if [ -x "$bin/native_selftest" ] && [ -f "$native" ]; then
    step "native self-test (C ABI, float64 reference)" 150 "$bin/native_selftest" "$native"
  else
    skip "native self-test" "not built"
  fi
  # A process whose first calls are made inside a graph capture (the core's first allocation there).
  [ -x "$bin/first_call_capture" ] && step "first calls inside a graph capture (portable)" 60 "$bin/first_call_capture"
  # Unit tests, then the conformance suite (every discovered backend on every device it can use).
  local t
  for t in "$bin"/test_*; do
    [ -x "$t" ] || continue
    [ "$(basename "$t")" = test_conformance ] && continue
    step "$(basename "$t")" 90 "$t" --report_level=short
  done
  if [ -x "$bin/test_conformance" ]; then
    step "test_conformance (every backend, every device)" 240 "$bin/test_conformance" --report_level=short
    # The suite's shapes are small, so portable's launchers pick only some of their cuts (one
    # tile, one channel a row group): the same suite again with the other cuts forced.
    local cut
    for cut in "lanes=8,steps=1,iters=3,chunks=1,flat=0" "lanes=32,steps=2,iters=2,chunks=2,flat=1" \
      "lanes=16,steps=3,iters=8,chunks=3,flat=1" "lanes=8,steps=1,iters=2,chunks=1,flat=1" "flat=0"; do
      step "test_conformance (portable CUDA, $cut)" 120 \
        env DELTAKERN_PORTABLE_CUDA_TILING="$cut" "$bin/test_conformance" --report_level=short --run_test=portable.cuda.0
    done
  else
    skip "test_conformance" "not built"
  fi
  # The command line's supervised run on the GPU targets: each target's cases in a conformance
  # worker process (lib/deltakern/deltakern-conformance-worker), which makes its own CUDA context.
  if [ -x "$bin/deltakern" ] && [ "$(budget_left)" -ge 240 ]; then
    step "deltakern conformance (CUDA targets, quick tier, worker processes)" 120 \
      "$bin/deltakern" conformance --device cuda --tier quick --junit "$OUT/conformance-cuda-junit.xml"
  else
    skip "deltakern conformance (CUDA targets)" "not built or time budget"
  fi
  # The cuts must agree to the bit (same arithmetic in the same order): portable's results under
  # the launcher's cut and four forced ones, as digests of a fixed set of calls.
  if [ -x "$bin/portable_cut_digest" ]; then
    step "portable CUDA, same bits under every cut (digests)" 120 bash -c '
      ref=$("$1/portable_cut_digest") || { echo "$ref"; exit 1; }
      for cut in "flat=0" "flat=1" "lanes=8,steps=1,iters=2,chunks=1,flat=1" \
        "lanes=16,steps=3,iters=8,chunks=3,flat=1"; do
        got=$(DELTAKERN_PORTABLE_CUDA_TILING="$cut" "$1/portable_cut_digest") || { echo "$got"; exit 1; }
        if [ "$got" != "$ref" ]; then
          echo "under $cut the digests differ from the launcher cut:"
          diff <(echo "$ref") <(echo "$got")
          exit 1
        fi
      done
      echo "$(echo "$ref" | wc -l) calls, identical under the launcher cut and 4 forced cuts"' _ "$bin"
  else
    skip "portable cut digests" "not built"
  fi
  # The same suite through the command line, when the Boost program was not built.
  [ ! -x "$bin/test_conformance" ] && [ -x "$bin/deltakern" ] && step "deltakern conformance" 300 "$bin/deltakern" conformance
  # The benchmark before the optional checks: its table is what the run is for.
  if [ -x "$bin/bench_gpu" ]; then
    step "bench_gpu (native vs portable, CUDA events)" 300 "$bin/bench_gpu" --out "$OUT/bench_gpu.md"
  else
    skip "bench_gpu" "not built"
  fi
  # compute-sanitizer: memcheck over the self-test's quick set, racecheck on the same.
  if ! command -v compute-sanitizer >/dev/null 2>&1 || [ ! -x "$bin/native_selftest" ]; then
    skip "compute-sanitizer" "not installed"
  elif [ "$(budget_left)" -lt 150 ]; then
    skip "compute-sanitizer" "time budget"
  else
    step "compute-sanitizer memcheck (native, quick set)" $(($(budget_left) / 2)) \
      compute-sanitizer --tool memcheck --error-exitcode 9 "$bin/native_selftest" "$native" --quick
    if [ "$(budget_left)" -ge 90 ]; then
      step "compute-sanitizer racecheck (native, quick set)" $(($(budget_left) - 30)) \
        compute-sanitizer --tool racecheck --error-exitcode 9 "$bin/native_selftest" "$native" --quick
    else
      skip "compute-sanitizer racecheck" "time budget"
    fi
    # initcheck: no kernel reads device memory that nothing wrote (the suite fills every input).
    if [ "$(budget_left)" -ge 90 ]; then
      step "compute-sanitizer initcheck (native, quick set)" $(($(budget_left) - 30)) \
        compute-sanitizer --tool initcheck --error-exitcode 9 "$bin/native_selftest" "$native" --quick
    else
      skip "compute-sanitizer initcheck" "time budget"
    fi
  fi
  if [ -x "$bin/native_kernel_bench" ] && [ -f "$native" ] && [ "$(budget_left)" -ge 60 ]; then
    step "native kernel bench (C ABI)" $(($(budget_left) - 10)) "$bin/native_kernel_bench" "$native"
  fi

  summary
  local failed=$?
  if [ -f "$OUT/bench_gpu.md" ]; then
    echo
    echo "== bench_gpu (native rows; full table: $OUT/bench_gpu.md)"
    grep -E '^\| (op|---|.*\| native \|)' "$OUT/bench_gpu.md" || true
  fi
  echo
  [ $failed -eq 0 ] && echo "gpu-check: all steps passed" || echo "gpu-check: $failed step(s) failed"
  return $((failed > 0))
}

# ---------------------------------------------------------------------------- tiers
# scripts/gpu-check.sh tiers [full|large] [VARIANT...] on the GPU machine: the supervised
# conformance run at that tier on native and portable (CUDA) and portable (CPU) at once, each in
# its own worker processes, and on native/cuda for each named variant (its plugin first on
# DELTAKERN_PLUGIN_PATH: the log's first lines show the carried native rejected as its
# duplicate); logs and JUnit under $OUT. The large tier's 128k-token cases take one to two
# minutes each (the suite's host work), so at that tier give it a call of its own.
tiers() {
  local tier="${1:-full}"
  [ $# -gt 0 ] && shift
  local variants=("$@")
  OUT="${OUT:-$PWD/gpu-results}"
  mkdir -p "$OUT"
  link_build_paths
  local cli="$carry/bin/deltakern" work names=() pids=() variant
  work=$(mktemp -d)
  for variant in "${variants[@]}"; do unpack_variant "$variant" "$work/$variant"; done
  conformance_run() {  # NAME BACKEND DEVICE [PLUGIN_DIR]
    env ${4:+DELTAKERN_PLUGIN_PATH="$4"} "$cli" conformance --backend "$2" --device "$3" --tier "$tier" \
      --seed "${SEED:-1}" --junit "$OUT/$1.xml" >"$OUT/$1.log" 2>&1 &
    pids+=("$!")
    names+=("$1")
  }
  for target in "native cuda" "portable cuda" "portable cpu"; do
    set -- $target
    conformance_run "$1-$2-$tier" "$1" "$2"
  done
  for variant in "${variants[@]}"; do
    conformance_run "native-cuda-$tier-$variant" native cuda "$work/$variant"
  done
  local failed=0 i
  for i in "${!pids[@]}"; do
    wait "${pids[$i]}" || failed=$((failed + 1))
    echo "== ${names[$i]}: $(tail -n 1 "$OUT/${names[$i]}.log")"
    grep -E '^FAIL' -A1 "$OUT/${names[$i]}.log" | head -n 10
  done
  rm -rf "$work"
  return $((failed > 0))
}

# ---------------------------------------------------------------------------- python
# scripts/gpu-check.sh python on the GPU machine: the Python package's CUDA half. The package is
# staged as a wheel installs it, from the carried extension (pack with PY_INCLUDE) and tree (pack
# with CUDA_RUNTIME=Shared, as the wheel builds); then the pytest suite with torch on CUDA (test_cuda.py, test_cuda_graphs.py
# and the CPU half beside them) and the per-call cost benchmark.
python_half() {
  OUT="${OUT:-$PWD/gpu-results}"
  mkdir -p "$OUT"
  OUT=$(cd "$OUT" && pwd)
  : >"$OUT/gpu-check.log"
  link_build_paths
  local ext=/tmp/deltakern-python
  rm -rf "$ext" && mkdir -p "$ext"
  echo "GPU: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | head -1); $(python3 --version)"
  [ -n "$(ls "$carry"/python/deltakern/_core*.so 2>/dev/null)" ] || die "no extension in .carry/python: pack with PY_INCLUDE"
  mkdir -p "$ext/site/deltakern"
  cp "$repo"/python/deltakern/*.py "$carry"/python/deltakern/_core*.so "$ext/site/deltakern/"
  cp -a "$carry/lib" "$carry/bin" "$carry/share" "$ext/site/deltakern/"
  local wheel
  wheel=$(ls "$carry"/wheels/deltakern_accel-*.whl 2>/dev/null | head -1)
  if [ -n "$wheel" ]; then
    # native as `pip install deltakern[accel]` lays it out: a distribution of its own, found
    # through its entry point, rather than in the package's plugin directory.
    rm -f "$ext/site/deltakern/lib/deltakern/plugins/libdeltakern_native.so"
    python3 -m pip install --quiet --no-index --no-deps --target "$ext/site" "$wheel" || die "cannot install $wheel"
    echo "installed $(basename "$wheel")"
  fi
  # The package as a wheel installs it: the extension finds deltakern/lib/libdeltakern.so beside
  # it ($ORIGIN/lib), which finds its plugins, probe and config relative to itself.
  export LD_LIBRARY_PATH="$carry/lib/deps"
  export PYTHONPATH="$ext/site" DELTAKERN_REQUIRE_STANDIN=1 PYTHONUNBUFFERED=1 \
    DELTAKERN_TEST_PLUGINS="$carry/tests/plugins/libdeltakern_test_standin.so"
  step "python: list_backends()" 60 python3 -c 'import torch, deltakern, pprint
pprint.pprint([(p["name"], p["state"], p["path"], [(d["device"], d["available"]) for d in p["devices"]]) for p in deltakern.list_backends()])'
  step "pytest (CUDA and CPU halves)" 420 python3 -m pytest "$repo/python/tests" -q -p no:cacheprovider -rs \
    --junitxml "$OUT/pytest.xml"
  step "call overhead (CUDA, eager and graph replay)" 180 python3 "$repo/python/bench/call_overhead.py" --device cuda
  summary
  return $(($? > 0))
}

# ---------------------------------------------------------------------------- variants
variant() {
  local name="${1:-}" build="${BUILD_DIR:-$repo/build-gpu}"
  [[ "$name" =~ ^[A-Za-z0-9_.-]+$ ]] || die "usage: $0 variant NAME (letters, digits, _ . -)"
  local so="$build/lib/deltakern/plugins/libdeltakern_native.so"
  [ -f "$so" ] || die "no native plugin at $so: build it first (ninja -C $build deltakern_native)"
  mkdir -p "$carry/variants"
  xz -T2 -3 -c "$so" >"$carry/variants/$name.so.xz" || die "cannot compress $so"
  echo "variant $name: $(du -h "$carry/variants/$name.so.xz" | cut -f1) ($(git -C "$repo" rev-parse --short HEAD 2>/dev/null)$(git -C "$repo" diff --quiet 2>/dev/null || echo '+changes'))"
}

# unpack_variant NAME DIR: variant NAME's plugin as DIR/libdeltakern_native.so, unpacked with
# Python's lzma (the GPU machine needs no xz tool).
unpack_variant() {
  local xzf="$carry/variants/$1.so.xz"
  [ -f "$xzf" ] || die "no variant $1 in $carry/variants"
  mkdir -p "$2"
  python3 -c 'import lzma, shutil, sys
with lzma.open(sys.argv[1]) as src, open(sys.argv[2], "wb") as dst: shutil.copyfileobj(src, dst)' \
    "$xzf" "$2/libdeltakern_native.so" || die "cannot unpack $xzf"
}

compare() {
  local rounds=2
  if [ $# -gt 0 ] && [ "$1" != "--" ]; then
    rounds="$1"
    shift
  fi
  [ "${1:-}" = "--" ] && shift
  local args=("$@")
  [ ${#args[@]} -gt 0 ] || args=(--only serving --backends native)
  # Each build as it is, then under each of ENVS's settings; checked before anything is set up.
  local settings=("") setting
  for setting in ${ENVS:-}; do
    [[ "$setting" =~ ^[A-Z_][A-Z0-9_]*=[^,=]*(,[A-Z_][A-Z0-9_]*=[^,=]*)*$ ]] ||
      die "ENVS: '$setting' is not VAR=VALUE[,VAR=VALUE]"
    settings+=("$setting")
  done
  OUT="${OUT:-$PWD/gpu-results}"
  mkdir -p "$OUT"
  OUT=$(cd "$OUT" && pwd)
  [ -x "$carry/bin/bench_gpu" ] || die "no $carry/bin/bench_gpu: pack on the build machine first"
  link_build_paths
  local work
  work=$(mktemp -d)
  mkdir -p "$work/logs"
  local names=(main) xzf name
  for xzf in "$carry"/variants/*.so.xz; do
    [ -f "$xzf" ] || continue
    name=$(basename "$xzf" .so.xz)
    [ -z "${VARIANTS:-}" ] || [[ " $VARIANTS " == *" $name "* ]] || continue
    unpack_variant "$name" "$work/plugins/$name"
    names+=("$name")
  done
  echo "GPU: $(nvidia-smi --query-gpu=name --format=csv,noheader 2>&1 | head -1); builds: ${names[*]}; settings: ${ENVS:-none}; rounds: $rounds"
  local r logs=()
  for ((r = 1; r <= rounds; r++)); do
    for name in "${names[@]}"; do
      local plugin_path=()
      [ "$name" = main ] || plugin_path=("DELTAKERN_PLUGIN_PATH=$work/plugins/$name")
      for setting in "${settings[@]}"; do
        local label="$name" log envs=()
        if [ -n "$setting" ]; then
          label="$name@${setting//DELTAKERN_NATIVE_/}"
          IFS=, read -ra envs <<<"$setting"
        fi
        log="$work/logs/$label.r$r.log"
        env "${plugin_path[@]}" "${envs[@]}" timeout 300 "$carry/bin/bench_gpu" "${args[@]}" >"$log" 2>&1
        echo "$label round $r: rc $?"
        logs+=("$log")
      done
    done
  done
  python3 "$repo/scripts/bench-compare.py" "${logs[@]}" | tee "$work/logs/compare.txt"
  tar -C "$work/logs" -czf "$OUT/compare.tgz" . && rm -rf "$work"
}

profile() {
  local row="${1:-}" variant="${2:-}"
  [ -n "$row" ] || die "usage: $0 profile ROW [VARIANT] (ROW: a native_kernel_bench row, e.g. \"chl D8192 T1k 64mix\")"
  command -v ncu >/dev/null 2>&1 || die "no ncu on this machine"
  [ -x "$carry/bin/native_kernel_bench" ] || die "no $carry/bin/native_kernel_bench: pack on the build machine first"
  OUT="${OUT:-$PWD/gpu-results}"
  mkdir -p "$OUT"
  OUT=$(cd "$OUT" && pwd)
  link_build_paths
  local work plugin="$carry/lib/deltakern/plugins/libdeltakern_native.so"
  work=$(mktemp -d)
  if [ -n "$variant" ]; then
    unpack_variant "$variant" "$work/plugin"
    plugin="$work/plugin/libdeltakern_native.so"
  fi
  echo "GPU: $(nvidia-smi --query-gpu=name --format=csv,noheader 2>&1 | head -1); row: $row; plugin: ${variant:-main}"
  timeout 300 ncu --clock-control none --set full -k "regex:${KERNEL:-varlen}" --launch-skip "${SKIP:-2}" \
    --launch-count 1 -f -o "$work/profile" "$carry/bin/native_kernel_bench" "$plugin" --filter "$row" --iters 3 \
    >"$work/ncu.log" 2>&1 || { tail -20 "$work/ncu.log"; die "ncu failed"; }
  ncu -i "$work/profile.ncu-rep" --page details >"$work/details.txt" 2>&1
  ncu -i "$work/profile.ncu-rep" --page source --csv --print-source sass >"$work/source.csv" 2>&1
  grep -E "^  [a-z].*\(|Duration|Registers Per Thread|Issued Warp Per Scheduler|Active Warps Per Scheduler" "$work/details.txt"
  python3 "$repo/scripts/ncu-summary.py" "$work/source.csv" | tee "$work/summary.txt"
  tar -C "$work" --exclude=./plugin -czf "$OUT/profile.tgz" . && rm -rf "$work"
}

case "${1:-}" in
  pack) pack ;;
  variant) variant "${2:-}" ;;
  compare)
    shift
    compare "$@"
    ;;
  profile) profile "${2:-}" "${3:-}" ;;
  python) python_half ;;
  run) run ;;
  tiers)
    shift
    tiers "$@"
    ;;
  *)
    echo "usage: $0 pack|variant NAME|run|tiers [full|large] [VARIANT...]|compare [ROUNDS] [-- ARGS]|profile ROW [VARIANT]|python" >&2
    exit 2
    ;;
esac
