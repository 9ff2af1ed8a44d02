#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `make test-sdist` (CI runs it): the source release as a user gets it (issue 25).
#   1. python -m build --sdist, and the tarball compared with `git ls-files`: every tracked file
#      is in it (MANIFEST.in) but the raw results in docs/results/ (pruned: measurements, not
#      sources), and nothing untracked (a stray build product, a file not added).
#   2. A wheel built from that sdist alone (pip wheel, no cache, no kernel cache: the kernels are
#      compiled from the tarball's sources) and installed with its test extra into a fresh venv.
#   3. The sdist's own test suite against that installed copy, from the tarball unpacked into
#      build/sdist/src with its (unbuilt) gpuprofile/ folder in place: the venv's `pytest` (not
#      `python -m pytest`, which would put the folder first on sys.path) imports the installed
#      copy, and tests/conftest.py runs the interpreters the tests start outside that folder.
# The kernels are compiled for one architecture unless GPUPROFILE_CUDA_ARCHS says otherwise (the
# CPU suite launches none). PYTHON (default python3, with `build` installed: the test extra has
# it) builds the sdist and makes the venv. Arguments go to pytest (default: -q -p no:cacheprovider
# -n 2). Exit status: 0 when every step passed; the step that failed says why.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=$ROOT/build/sdist
PYTHON=${PYTHON:-python3}
PYTEST_ARGS=("$@")
[ ${#PYTEST_ARGS[@]} -eq 0 ] && PYTEST_ARGS=(-q -p no:cacheprovider -n 2)
export GPUPROFILE_CUDA_ARCHS=${GPUPROFILE_CUDA_ARCHS:-80}
unset GPUPROFILE_KERNEL_CACHE

fail() { echo "test_sdist: $*" >&2; exit 1; }

"$PYTHON" -c "import build" 2>/dev/null || fail "$PYTHON has no 'build' (pip install build, or .[test])"
rm -rf "$OUT"
mkdir -p "$OUT"

start=$SECONDS
"$PYTHON" -m build --sdist --outdir "$OUT/dist" . >"$OUT/sdist.log" 2>&1 ||
    { cat "$OUT/sdist.log"; fail "python -m build --sdist failed"; }
sdists=("$OUT"/dist/gpuprofile-*.tar.gz)
[ ${#sdists[@]} -eq 1 ] || fail "expected one sdist in $OUT/dist, found: ${sdists[*]}"
SDIST=${sdists[0]}
echo "sdist: $SDIST ($(du -k "$SDIST" | cut -f1) kB, $((SECONDS - start)) s)"

if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    tar -tzf "$SDIST" | cut -d/ -f2- | grep -v -e '/$' -e '^$' | sort >"$OUT/in_sdist.txt"
    # docs/results/ is left out of the sdist (MANIFEST.in): not expected, and refused if there
    git ls-files | grep -v '^docs/results/' | while read -r f; do [ -e "$f" ] && echo "$f"; done |
        sort >"$OUT/in_git.txt"
    missing=$(comm -23 "$OUT/in_git.txt" "$OUT/in_sdist.txt")
    # written by setuptools into every sdist
    extra=$(comm -13 "$OUT/in_git.txt" "$OUT/in_sdist.txt" |
            grep -v -x -e PKG-INFO -e setup.cfg -e 'gpuprofile\.egg-info/.*' || true)
    results=$(grep '^docs/results/' "$OUT/in_sdist.txt" || true)
    [ -z "$results" ] || fail "docs/results/ is in the sdist (MANIFEST.in prunes it):"$'\n'"$results"
    [ -z "$missing" ] || fail "tracked files missing from the sdist (MANIFEST.in):"$'\n'"$missing"
    [ -z "$extra" ] || fail "files in the sdist that git does not track (add or remove them):"$'\n'"$extra"
    echo "sdist contents: the $(wc -l <"$OUT/in_git.txt") tracked files outside docs/results/, nothing else"
fi

start=$SECONDS
"$PYTHON" -m venv "$OUT/venv"
VPY=$OUT/venv/bin/python
"$VPY" -m pip install -q --upgrade pip
"$VPY" -m pip wheel -q --no-deps --no-cache-dir --wheel-dir "$OUT/wheel" "$SDIST" ||
    fail "building a wheel from the sdist failed (see above)"
wheels=("$OUT"/wheel/gpuprofile-*.whl)
"$VPY" -m pip install -q "${wheels[0]}[test]" || fail "installing the wheel failed (see above)"
echo "built from the sdist and installed: ${wheels[0]##*/} ($((SECONDS - start)) s)"

mkdir -p "$OUT/src"
tar -xzf "$SDIST" -C "$OUT/src" --strip-components=1
installed=$(cd "$OUT" && "$VPY" -c "import gpuprofile, os; print(os.path.dirname(gpuprofile.__file__))")
case $(realpath "$installed") in
    "$(realpath "$OUT/venv")"/*) ;;
    *) fail "import gpuprofile found $installed, not the venv's copy" ;;
esac
found=$(cd "$OUT/src" && "$OUT/venv/bin/pytest" -q -p no:cacheprovider tests/test_installed.py 2>&1) ||
    { echo "$found"; fail "the sdist's tests do not run against the installed copy"; }

start=$SECONDS
# the venv activated: a test that runs a command by name finds the venv's
(cd "$OUT/src" && PATH="$OUT/venv/bin:$PATH" VIRTUAL_ENV="$OUT/venv" "$OUT/venv/bin/pytest" "${PYTEST_ARGS[@]}") ||
    fail "the sdist's tests failed against the installed copy"
echo "the sdist's tests passed against the installed copy ($((SECONDS - start)) s)"
