#!/usr/bin/env bash
# `make test-pythons` (CI runs it): the CPU test suite on every Python the package claims, 3.10 to
# 3.13. For each: a fresh venv, the README's install (`pip install -e .[test]`) with compiler
# warnings as errors for our C sources (GPUPROFILE_WERROR=1), then `pytest`. The GPU tests skip
# themselves without a device.
#
# It runs in a copy of the sources (build/pythons/src), so the extension of the active
# environment is left alone, and the venvs live in build/pythons/<version>. The kernels are
# compiled once for all the Pythons (GPUPROFILE_KERNEL_CACHE=build/pythons/kernels), for one
# architecture unless GPUPROFILE_CUDA_ARCHS says otherwise (the CPU suite launches none).
#
# Interpreters: GPUPROFILE_PYTHONS="/path/to/python3.10 /path/to/python3.12 ..." names them;
# otherwise each version is looked for as pythonX.Y on PATH, then in pyenv's versions folder.
# A version not found fails the run (it is listed) unless GPUPROFILE_PYTHONS_ALLOW_MISSING=1.
# Arguments go to pytest (default: -q -p no:cacheprovider -n 2).
# Exit status: 0 when every version passed, 1 otherwise; a summary line per version at the end.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=$ROOT/build/pythons
VERSIONS="3.10 3.11 3.12 3.13"
PYTEST_ARGS=("$@")
[ ${#PYTEST_ARGS[@]} -eq 0 ] && PYTEST_ARGS=(-q -p no:cacheprovider -n 2)

works() {  # works <interpreter> <version>: it runs and is that version
    "$1" -c 'import sys; sys.exit(0 if "%d.%d" % sys.version_info[:2] == sys.argv[1] else 1)' "$2" \
        >/dev/null 2>&1
}

find_python() {  # find_python <version>: prints the interpreter's path, or nothing
    local v=$1 p
    for p in ${GPUPROFILE_PYTHONS:-}; do
        works "$p" "$v" && { echo "$p"; return; }
    done
    [ -n "${GPUPROFILE_PYTHONS:-}" ] && return
    p=$(command -v "python$v" 2>/dev/null) && works "$p" "$v" && { echo "$p"; return; }
    for p in $(ls -d "${PYENV_ROOT:-$HOME/.pyenv}"/versions/"$v".*/bin/"python$v" 2>/dev/null |
               sort -V -r); do
        works "$p" "$v" && { echo "$p"; return; }
    done
}

# The copy: -p keeps modification times, so the kernel cache sees unchanged sources as such.
mkdir -p "$OUT/src"
rm -rf "${OUT:?}/src"/{.ci,csrc,kernels,gpuprofile,tests,benchmarks,docs,tools}
cp -rp setup.py pyproject.toml README.md LICENSE CHANGELOG.md MANIFEST.in Makefile .ci csrc kernels gpuprofile tests benchmarks docs tools \
    "$OUT/src/"
find "$OUT/src" \( -name '__pycache__' -o -name '_C*.so' -o -name '*.egg-info' \) -prune -exec rm -rf {} +

export GPUPROFILE_WERROR=1
export GPUPROFILE_KERNEL_CACHE=$OUT/kernels
export GPUPROFILE_CUDA_ARCHS=${GPUPROFILE_CUDA_ARCHS:-80}
summary=()
failed=0
for v in $VERSIONS; do
    py=$(find_python "$v")
    if [ -z "$py" ]; then
        if [ "${GPUPROFILE_PYTHONS_ALLOW_MISSING:-0}" = 1 ]; then
            summary+=("Python $v: not found, skipped")
        else
            summary+=("Python $v: NOT FOUND (set GPUPROFILE_PYTHONS, or GPUPROFILE_PYTHONS_ALLOW_MISSING=1)")
            failed=1
        fi
        continue
    fi
    echo "=== Python $v ($py) ==="
    start=$SECONDS
    venv=$OUT/$v
    rm -rf "$venv"
    status=ok
    if ! "$py" -m venv "$venv"; then
        status="FAILED: venv"
    elif ! (cd "$OUT/src" && "$venv/bin/python" -m pip install -q -e ".[test]"); then
        status="FAILED: install (a compiler warning is an error here: see above)"
    elif ! (cd "$OUT/src" && "$venv/bin/python" -m pytest "${PYTEST_ARGS[@]}"); then
        status="FAILED: tests"
    fi
    [ "$status" = ok ] || failed=1
    summary+=("Python $v: $status ($((SECONDS - start)) s)")
done
echo "=== test_pythons summary ==="
printf '%s\n' "${summary[@]}"
exit $failed
