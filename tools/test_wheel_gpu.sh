#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The manylinux wheel on a GPU machine (issue 25): installed into a fresh venv with no nvcc on
# PATH, the GPU tests of this checkout run against it. Two steps, because the GPU machine may have
# no network:
#   tools/test_wheel_gpu.sh prepare        here, with network and the CUDA toolkit: the wheel for
#                                          PYTHON (default python3.12) into dist/ (build_wheel.sh),
#                                          and wheels of numpy, pytest and hypothesis into
#                                          build/wheelhouse, for a machine whose Python lacks them
#   tools/test_wheel_gpu.sh [pytest args]  on the GPU machine, with dist/ and build/wheelhouse
#                                          copied over: tools/test_wheel.sh with OFFLINE=1 NO_NVCC=1
#                                          (a venv that sees PYTHON's packages, e.g. torch's), PYTHON
#                                          by default /opt/torch/.venv/bin/python if there, else
#                                          python3; pytest args by default -q -p no:cacheprovider -m gpu
# CUPTI is found as a user's would be: the nvidia-cuda-cupti wheel in PYTHON's site-packages
# (torch's dependency), else a CUDA toolkit's; `gpuprofile info` before the tests says which.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "${1:-}" = prepare ]; then
    PYTHON=${PYTHON:-python3.12}
    tools/build_wheel.sh "$PYTHON"
    rm -rf build/wheelhouse
    "$PYTHON" -m pip download -q --only-binary=:all: -d build/wheelhouse numpy pytest hypothesis
    echo "ready: carry dist and build/wheelhouse to the GPU machine, run tools/test_wheel_gpu.sh there"
    exit 0
fi

if [ -z "${PYTHON:-}" ]; then
    PYTHON=python3
    [ -x /opt/torch/.venv/bin/python ] && PYTHON=/opt/torch/.venv/bin/python
fi
command -v nvidia-smi >/dev/null && nvidia-smi -L
[ $# -eq 0 ] && set -- -q -p no:cacheprovider -m gpu
PYTHON=$PYTHON OFFLINE=1 NO_NVCC=1 WHEELHOUSE=${WHEELHOUSE:-$PWD/build/wheelhouse} exec tools/test_wheel.sh "$@"
