#!/usr/bin/env bash
# Installs the Debian 12 packages deltakern builds against (as root; it re-runs itself with sudo otherwise).
# The CUDA toolkit is optional: with nvcc on PATH the CUDA paths are built too.
# clang, libclang-rt-14-dev (the sanitizer and libFuzzer runtimes) and llvm-14 (llvm-symbolizer,
# for readable sanitizer stacks) are for CI's sanitizer and fuzzing jobs.
set -euo pipefail
if [ "$(id -u)" -ne 0 ]; then exec sudo "$0" "$@"; fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends \
  cmake ninja-build g++ pkg-config \
  libboost-dev libboost-test-dev \
  libspdlog-dev libfmt-dev libtomlplusplus-dev libdlpack-dev libcli11-dev \
  nlohmann-json3-dev libbenchmark-dev \
  clang libclang-rt-14-dev llvm-14
