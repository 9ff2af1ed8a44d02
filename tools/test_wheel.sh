#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `make test-wheel` (CI runs it after tools/build_wheel.sh): a built wheel installed into a fresh
# venv (build/test-wheel/venv) and this checkout's tests run against that installed copy (issue 25).
#   - The wheel: WHEEL, or the one wheel in dist/ for PYTHON's version (default python3).
#   - The venv gets the wheel and its test extra from the package index; with OFFLINE=1 (a machine
#     without network) it sees PYTHON's own packages instead (a venv's too, torch's say) and takes
#     what is missing of numpy, pytest and hypothesis from WHEELHOUSE=DIR, never an index.
#   - NO_NVCC=1 takes every folder with an nvcc out of PATH for the run: the wheel needs no toolkit.
#   - The tests run from build/test-wheel, a folder without a gpuprofile/ (Python puts the current
#     folder first on sys.path), with this checkout's tests; `import gpuprofile` is checked to
#     come from the venv first, and tests/conftest.py runs the interpreters the tests start so too.
# Arguments go to pytest (default: -q -p no:cacheprovider -n 2); a path given as tests/... is
# taken in the checkout. Exit status: pytest's, or 1 when a step before it failed (it says why).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=$ROOT/build/test-wheel
PYTHON=${PYTHON:-python3}
ARGS=()
for arg in "$@"; do
    case $arg in tests | tests/*) ARGS+=("$ROOT/$arg") ;; *) ARGS+=("$arg") ;; esac
done
[ ${#ARGS[@]} -eq 0 ] && ARGS=(-q -p no:cacheprovider -n 2)
printf '%s\n' "${ARGS[@]}" | grep -q "^$ROOT/tests" || ARGS+=("$ROOT/tests")

fail() { echo "test_wheel: $*" >&2; exit 1; }

v=$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])') || fail "$PYTHON does not run"
tag=cp${v/./}
if [ -z "${WHEEL:-}" ]; then
    wheels=("$ROOT"/dist/gpuprofile-*-"$tag"-"$tag"-manylinux_*.whl)
    [ -f "${wheels[0]}" ] || fail "no $tag manylinux wheel in dist/ (tools/build_wheel.sh $PYTHON)"
    [ ${#wheels[@]} -eq 1 ] || fail "several $tag wheels in dist/ (name one with WHEEL=): ${wheels[*]}"
    WHEEL=${wheels[0]}
fi
[ -f "$WHEEL" ] || fail "no wheel $WHEEL"

start=$SECONDS
rm -rf "$OUT"
mkdir -p "$OUT"
VPY=$OUT/venv/bin/python
vpip() { "$VPY" -m pip "$@"; }
if [ "${OFFLINE:-0}" = 1 ]; then
    if ! "$PYTHON" -m venv --system-site-packages "$OUT/venv" 2>"$OUT/venv.err"; then
        # a Python without ensurepip (Debian's without python3-venv): PYTHON's own pip serves
        rm -rf "$OUT/venv"
        "$PYTHON" -m venv --system-site-packages --without-pip "$OUT/venv" ||
            { cat "$OUT/venv.err"; fail "$PYTHON cannot make a venv"; }
        "$PYTHON" -m pip --version >/dev/null 2>&1 || fail "$PYTHON has neither ensurepip nor pip"
        vpip() { "$PYTHON" -m pip --python "$VPY" "$@"; }
    fi
    # A venv made by a venv's Python sees the base interpreter's packages, not that venv's (torch's
    # at /opt/torch/.venv): a .pth file adds PYTHON's own, after the new venv's.
    "$PYTHON" -c 'import site; print("\n".join(site.getsitepackages()))' >"$OUT/parent.pth"
    mv "$OUT/parent.pth" "$("$VPY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/_test_wheel_parent.pth"
    vpip install -q --no-index --no-deps "$WHEEL"
    if ! "$VPY" -c "import numpy, pytest, hypothesis" 2>/dev/null; then
        [ -n "${WHEELHOUSE:-}" ] || fail "$PYTHON lacks numpy, pytest or hypothesis, and no WHEELHOUSE"
        vpip install -q --no-index --find-links "$WHEELHOUSE" numpy pytest hypothesis
    fi
else
    "$PYTHON" -m venv "$OUT/venv"
    "$VPY" -m pip install -q --upgrade pip
    "$VPY" -m pip install -q "${WHEEL}[test]"
fi
echo "installed ${WHEEL##*/} into a fresh venv ($((SECONDS - start)) s)"

if [ "${NO_NVCC:-0}" = 1 ]; then
    kept=()
    IFS=: read -r -a entries <<<"$PATH"
    for dir in "${entries[@]}"; do [ -x "$dir/nvcc" ] || kept+=("$dir"); done
    PATH=$(IFS=:; echo "${kept[*]}")
    export PATH
    ! command -v nvcc >/dev/null || fail "nvcc is still on PATH: $(command -v nvcc)"
    echo "no nvcc on PATH"
fi

cd "$OUT"
installed=$("$VPY" -c "import gpuprofile, os; print(os.path.realpath(gpuprofile.__file__))")
case $installed in
    "$(realpath "$OUT/venv")"/*) ;;
    *) fail "import gpuprofile found $installed, not the venv's copy" ;;
esac
echo "testing $installed"
"$VPY" -m gpuprofile info || true
start=$SECONDS
status=0
PATH="$OUT/venv/bin:$PATH" VIRTUAL_ENV="$OUT/venv" "$VPY" -m pytest --rootdir="$ROOT" "${ARGS[@]}" || status=$?
echo "pytest against ${WHEEL##*/}: exit $status ($((SECONDS - start)) s)"
exit $status
