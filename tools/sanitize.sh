#!/usr/bin/env bash
# `make sanitize`: build gpuprofile._C with AddressSanitizer + UndefinedBehaviorSanitizer and run
# the CPU test suite against that build; any finding aborts the run (non-zero exit). Extra
# arguments go to pytest: `GPUPROFILE_FUZZ=ci-fuzz tools/sanitize.sh -m fuzz` fuzzes under the
# sanitizers.
#
# The sanitized extensions are built in copies of the sources (build/sanitize/<variant>), so the
# normal build in the active environment is left alone. Python itself is not built with ASan, so
# the ASan runtime is loaded first with LD_PRELOAD. Options, and why:
#   detect_leaks=0        CPython does not free everything at exit (interned strings, static
#                         types): LeakSanitizer would report those. Our own leaks are measured by
#                         the leak tests (tests/test_leaks.py) instead.
#   libstdc++ preloaded   ASan intercepts C++ throws only if libstdc++ is loaded when it starts
#                         (matplotlib's C++ extensions throw; python itself is C).
#   protect_shadow_gap=0  the CUDA driver maps memory where ASan's shadow gap would be (matters
#                         only on a GPU machine; harmless elsewhere).
#   -fno-sanitize-recover UBSan aborts at its first report, like ASan.
#   PYTHONMALLOC=malloc   CPython's small-object allocator (pymalloc) carves objects of up to 512
#                         bytes out of its own arenas, where ASan sees one big valid block: an
#                         overflow of a small bytes or list object goes unreported (the records()
#                         overflow of issue 23 did). With malloc, every object is its own block.
# Tests marked `leak` are left out: ASan's quarantine and shadow memory make the heap and the
# resident set grow by design, which is what those tests measure (they run in the normal suite).
# CUPTI dlopens the perfworks host library with RTLD_DEEPBIND, which the ASan runtime refuses
# (it aborts: google/sanitizers#611). So tests/counters, the only CPU tests that load it, run
# against a second build with UBSan alone; everything else runs under ASan + UBSan.
# Kernels are compiled once, for one architecture (the CPU suite launches none), and kept in
# build/sanitize/kernels between runs.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
OUT=$PWD/build/sanitize
ASAN_LIB=$(gcc -print-file-name=libasan.so)
if [ ! -e "$ASAN_LIB" ]; then
    echo "sanitize: gcc's libasan.so not found (Debian/Ubuntu: apt-get install libasan8)" >&2
    exit 2
fi
UBSAN="-fsanitize=undefined,float-cast-overflow -fno-sanitize-recover=all"
# venvs of Python >= 3.12 come without setuptools, older ones with one too old for pyproject.toml
if ! "$PYTHON" -c "import setuptools, sys; sys.exit(int(setuptools.__version__.split('.')[0]) < 77)" \
        2>/dev/null; then
    echo "sanitize: installing setuptools>=77 (to build the sanitized copies)"
    "$PYTHON" -m pip install -q "setuptools>=77"
fi

build() {  # build <variant> <sanitizer flags>
    local src=$OUT/$1
    mkdir -p "$src" "$OUT/$1-temp" "$OUT/kernels"
    rm -rf "${src:?}"/{.ci,csrc,kernels,gpuprofile,tests,benchmarks,docs,tools}
    # -p keeps modification times, so unchanged kernel objects are reused
    cp -rp setup.py pyproject.toml README.md LICENSE CHANGELOG.md MANIFEST.in Makefile .ci csrc kernels gpuprofile tests benchmarks docs tools "$src/"
    find "$src" \( -name '__pycache__' -o -name '_C*.so' \) -prune -exec rm -rf {} +
    (cd "$src" && CFLAGS="$2 -fno-omit-frame-pointer -g" LDFLAGS="$2" GPUPROFILE_CUDA_ARCHS=80 \
        GPUPROFILE_KERNEL_CACHE="$OUT/kernels" \
        "$PYTHON" setup.py -q build_ext --inplace --build-temp "$OUT/$1-temp" 2>&1 |
        grep -v -e _BetaConfiguration -e 'warnings.warn' -e '^/.*nvcc ' || true)
    test -n "$(ls "$src"/gpuprofile/_C*.so)"
}

run() {  # run <variant> <pytest args...>: the copy's tests against the copy's extension
    local src=$OUT/$1
    shift
    local rc=0
    (cd "$src" && PYTHONPATH=$src "$PYTHON" -c 'import gpuprofile._C as c, sys
sys.exit(0 if c.__file__.startswith(sys.argv[1]) else "sanitize: imported " + c.__file__)' "$src" &&
        PYTHONPATH=$src "$PYTHON" -m pytest -q -p no:cacheprovider -m "not gpu and not leak" "$@") ||
        rc=$?
    if [ $rc -ne 0 ] && [ $rc -ne 5 ]; then  # 5: the arguments selected no test here
        # pytest captures stderr, so the reports go to files (log_path): show them
        echo "sanitize: FAILED; sanitizer reports:" >&2
        cat "$OUT"/logs/* >&2 2>/dev/null || echo "(none: see the pytest output above)" >&2
        exit 1
    fi
}

build asan "-fsanitize=address $UBSAN"
build ubsan "$UBSAN"
rm -rf "$OUT/logs" && mkdir -p "$OUT/logs"
export PYTHONMALLOC=malloc
export ASAN_OPTIONS="detect_leaks=0:protect_shadow_gap=0:abort_on_error=1:log_path=$OUT/logs/asan"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:log_path=$OUT/logs/ubsan"
echo "== ASan + UBSan: every CPU test but tests/counters"
LD_PRELOAD="$ASAN_LIB $(gcc -print-file-name=libstdc++.so.6)" run asan --ignore=tests/counters "$@"
echo "== UBSan: tests/counters (CUPTI's perfworks host library cannot load under ASan)"
run ubsan tests/counters "$@"
