#!/usr/bin/env bash
# The Python job's dependencies: the build tools (nanobind, scikit-build-core) and the test
# tools (pytest, numpy, torch). torch from PyPI is a CUDA build of about 5.4 GB that takes about
# 9 minutes to install, so .ci/run starts this script in the background while the C++ job builds.
set -euo pipefail
pip() { python3 -m pip install --quiet --disable-pip-version-check "$@"; }
pip "nanobind>=2.4" "scikit-build-core>=0.10" "pytest>=7" "numpy>=1.22"
python3 -c "import torch" 2>/dev/null || pip torch
