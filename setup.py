"""Build gpuprofile._C: the C sources under csrc/ and the CUDA kernels under kernels/, one extension.

CUDA is found from CUDA_HOME (or CUDA_PATH), else /usr/local/cuda. The GPU architectures come from
GPUPROFILE_CUDA_ARCHS ("80;90" by default: sm_80 and sm_90 machine code plus compute_90 PTX). No GPU
is needed to build. The CUDA runtime is linked statically; CUPTI is loaded at run time (dlopen).
Kernels that use architecture-specific instructions (ARCH_SPECIFIC: wgmma, TMA and setmaxnreg exist
only on sm_90a) are compiled for that "a" target where its architecture is listed, without PTX, and
for the other listed ones as they are (their code there is a stub the launcher never reaches).

GPUPROFILE_WERROR=1 turns compiler warnings into errors for our C sources (csrc/; CI sets it, so
that an undeclared function or a bad conversion never reaches a user); nvcc's kernels are not
affected. GPUPROFILE_KERNEL_CACHE=DIR keeps the compiled kernels in DIR (in a folder per set of
nvcc flags) instead of the build's temporary folder, so builds for several Pythons compile them
once (tools/test_pythons.sh); an object is reused while it is newer than its sources.
"""

import hashlib
import os
import shlex
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from glob import glob

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))


def find_cuda():
    candidates = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"]
    for home in filter(None, candidates):
        nvcc = os.path.join(home, "bin", "nvcc")
        header = os.path.join(home, "include", "cuda_runtime_api.h")
        if os.path.isfile(nvcc) and os.path.isfile(header):
            return os.path.realpath(home)
    looked = ", ".join(c for c in candidates if c)
    sys.exit(
        "gpuprofile: cannot build without the CUDA toolkit (nvcc and headers). "
        f"Looked in: {looked}. Install the CUDA toolkit (12.8 or newer) or set CUDA_HOME."
    )


def cuda_lib_dir(home):
    for sub in ("lib64", "lib", "targets/x86_64-linux/lib", "targets/sbsa-linux/lib"):
        path = os.path.join(home, sub)
        if os.path.isfile(os.path.join(path, "libcudart_static.a")):
            return path
    sys.exit(f"gpuprofile: libcudart_static.a not found under {home}")


# Sources whose device code needs an architecture-specific target: path -> the architecture.
ARCH_SPECIFIC = {os.path.join("kernels", "attention", "attention_flash_wgmma.cu"): "90"}


def gencode_flags(specific=None):
    archs = os.environ.get("GPUPROFILE_CUDA_ARCHS", "80;90").replace(",", ";")
    archs = [a.strip() for a in archs.split(";") if a.strip()]
    if not archs or not all(a.rstrip("a").isdigit() for a in archs):
        sys.exit(f"gpuprofile: GPUPROFILE_CUDA_ARCHS must list compute capabilities like '80;90', got {archs!r}")
    flags = []
    for arch in archs:
        if arch.rstrip("a") == specific:
            arch = specific + "a"
        flags += [f"-gencode=arch=compute_{arch},code=sm_{arch}"]
    if specific is None:
        newest = max(archs, key=lambda a: int(a.rstrip("a")))
        flags += [f"-gencode=arch=compute_{newest},code=compute_{newest}"]
    return flags


class BuildExt(build_ext):
    """Compile kernels/**/*.cu with nvcc (in parallel), then link them into the C extension."""

    def build_extensions(self):
        home = find_cuda()
        libdir = cuda_lib_dir(home)
        ext = self.extensions[0]
        ext.include_dirs.append(os.path.join(home, "include"))
        ext.extra_objects = self.compile_cuda(home) + [os.path.join(libdir, "libcudart_static.a")]
        ext.define_macros.append(("GP_BUILD_CUDA_HOME", '"%s"' % home))
        self.parallel = os.cpu_count() or 1
        super().build_extensions()

    def compile_cuda(self, home):
        nvcc = os.path.join(home, "bin", "nvcc")
        extra = shlex.split(os.environ.get("GPUPROFILE_NVCC_FLAGS", ""))
        flags = ["-O3", "-std=c++17", "-lineinfo", "-Xcompiler", "-fPIC,-fvisibility=hidden"]
        flags += ["--expt-relaxed-constexpr", "-Ikernels", *extra]
        if os.environ.get("CUDAHOSTCXX"):
            flags += ["-ccbin", os.environ["CUDAHOSTCXX"]]
        out_dir = os.path.join(self.build_temp, "kernels")
        cache = os.environ.get("GPUPROFILE_KERNEL_CACHE")
        if cache:  # one folder per nvcc and flags: objects of other flags are never mixed in
            specific = [f for a in sorted(set(ARCH_SPECIFIC.values())) for f in gencode_flags(a)]
            key = " ".join([nvcc, *flags, *gencode_flags(), *specific])
            out_dir = os.path.join(os.path.abspath(cache), hashlib.sha256(key.encode()).hexdigest()[:16])
        os.makedirs(out_dir, exist_ok=True)
        sources = sorted(glob(os.path.join("kernels", "**", "*.cu"), recursive=True))
        headers = [h for ext in ("h", "cuh") for h in glob(os.path.join("kernels", "**", f"*.{ext}"), recursive=True)]
        jobs, objects = [], []
        for src in sources:
            obj = os.path.join(out_dir, os.path.relpath(src, "kernels").replace(os.sep, "_") + ".o")
            objects.append(obj)
            deps = [src, *headers]
            if self.force or not os.path.exists(obj) or max(map(os.path.getmtime, deps)) > os.path.getmtime(obj):
                jobs.append([nvcc, *flags, *gencode_flags(ARCH_SPECIFIC.get(src)), "-c", src, "-o", obj])

        def run(cmd):
            print(" ".join(cmd), flush=True)
            proc = subprocess.run(cmd, capture_output=True, text=True)
            if proc.returncode != 0:
                raise RuntimeError(f"nvcc failed on {cmd[-3]}:\n{proc.stdout}{proc.stderr}")
            return proc.stderr

        with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
            for warnings in pool.map(run, jobs):
                if warnings.strip():
                    print(warnings, file=sys.stderr)
        return objects


# An undeclared function is an error, not a warning pip hides: C assumes it returns int, and a
# pointer truncated to int crashes (PyFrame_GetBack on 3.10 did).
C_FLAGS = ["-std=c11", "-O2", "-Wall", "-Wextra", "-Wno-missing-field-initializers",
           "-Wno-unused-parameter", "-fvisibility=hidden", "-Werror=implicit-function-declaration"]
if os.environ.get("GPUPROFILE_WERROR", "0") not in ("", "0"):
    C_FLAGS.append("-Werror")

extension = Extension(
    "gpuprofile._C",
    sources=sorted(glob("csrc/**/*.c", recursive=True)),
    # Includes name their folder ("core/errors.h", "attention/attention.h"): csrc/ and kernels/ are
    # the roots; csrc/core/cxx_shim comes first (see its header).
    include_dirs=["csrc/core/cxx_shim", "csrc", "kernels"],
    extra_compile_args=C_FLAGS,
    libraries=["dl", "pthread", "rt", "stdc++"],
    define_macros=[("PY_SSIZE_T_CLEAN", None)],
    depends=glob("csrc/**/*.h", recursive=True) + glob("kernels/**/*.h", recursive=True),
)

setup(ext_modules=[extension], cmdclass={"build_ext": BuildExt})
