#!/usr/bin/env bash
# The Python job: build and install the package from this checkout (pip install ./python, the
# same command a user runs: CPU-only, the C++ tests and benchmarks off), then run its pytest
# suite against the installed package, with the in-place CPU stand-in from the C++ build at
# BUILD_DIR (default build/) so that both contracts run. Needs ci/install-deps.sh first.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-$repo/build}" && pwd)  # absolute: the tests run from inside it
standin=$build/tests/plugins/libdeltakern_test_standin.so
[[ -f $standin ]] || { echo "python/ci/test.sh: no stand-in at $standin (build the C++ tests first)" >&2; exit 1; }
export CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-2}
start=$SECONDS
python3 -m pip install --quiet --disable-pip-version-check --no-build-isolation "$repo/python"
echo "python: pip install ./python: $((SECONDS - start)) s"
# deltakern-accel (the native plugin as its own wheel) where nvcc is here: the package must find
# it through its entry point and say why it cannot serve (test_plugin_distributions.py).
if command -v nvcc >/dev/null 2>&1; then
  start=$SECONDS
  python3 -m pip install --quiet --disable-pip-version-check --no-build-isolation --no-deps "$repo/python/accel"
  echo "python: pip install ./python/accel: $((SECONDS - start)) s"
else
  echo "python: no nvcc on PATH: deltakern-accel not built, its test skips"
fi
start=$SECONDS
# Run from outside python/, whose deltakern/ (no extension in it) would shadow the installed one.
cd "$build"
DELTAKERN_REQUIRE_STANDIN=1 DELTAKERN_TEST_PLUGINS=$standin \
  python3 -m pytest "$repo/python/tests" -q -p no:cacheprovider
echo "python: pytest: $((SECONDS - start)) s"
