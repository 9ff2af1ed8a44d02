# SPDX-License-Identifier: Apache-2.0
"""Build gpuprofile._C: the C sources under csrc/ and the CUDA kernels under kernels/, one extension.

CUDA is found from CUDA_HOME (or CUDA_PATH), else /usr/local/cuda, and must be 13.0 or newer (its
cuda_runtime_api.h says which): the extension calls CUDA 13's CUPTI (cuptiSubscribe_v2, and it
loads libcupti.so.13), which CUDA 12.8's headers and library do not have. The GPU architectures
come from GPUPROFILE_CUDA_ARCHS ("80;90" by default: sm_80 and sm_90 machine code plus compute_90
PTX). No GPU is needed to build. The CUDA runtime is linked statically; CUPTI is loaded at run
time (dlopen). Kernels that use architecture-specific instructions (ARCH_SPECIFIC: wgmma, TMA and setmaxnreg exist
only on sm_90a) are compiled for that "a" target where its architecture is listed, without PTX, and
for the other listed ones as they are (their code there is a stub the launcher never reaches).

GPUPROFILE_ATTN_LAB=1 builds every configuration of flash_wgmma's table of schedules
(kernels/attention/flash_wgmma/schedules.h) both ways, for the benchmarks that force one through
_C._testing.attention; without it the build has what the per-shape rule runs.

GPUPROFILE_WERROR=1 turns compiler warnings into errors for our C sources (csrc/; CI sets it, so
that an undeclared function or a bad conversion never reaches a user); nvcc's kernels are not
affected.

Rebuilds compile only what changed, also under pip: pip gives every build a fresh temporary
folder, so the objects live in the source tree's build/ instead, one folder per compiler and
flags (build/c/<python>-<hash> for the C sources, build/kernels/<hash> for the kernels), and an
object is reused while it is newer than its source and every header. GPUPROFILE_KERNEL_CACHE=DIR
puts the kernel folders in DIR instead, so that several copies of the tree share them
(tools/test_pythons.sh). `--build-temp` given to build_ext is used as it is. The build says what
it compiles and what it reuses (pip shows it with -v).

A source tree without its kernels or the C++ shim (an sdist built without MANIFEST.in was one)
fails here with the missing paths, and a built module that leaves one of our symbols (gp_*,
cuda*) undefined fails the build: the linker of a shared object allows undefined symbols, so
without this check the module would build and fail only at import.

GPUPROFILE_GLIBC=2.28 links the module against that glibc's symbols (with zig's linker, from the
ziglang package) and fails the build if it needs anything newer: tools/build_wheel.sh makes the
manylinux wheels so. docs/install.md has the rest.
"""

import hashlib
import os
import platform
import re
import shlex
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from glob import glob

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))
CUDA_MIN = (13, 0)
# Paths a build cannot go without; a glob that finds nothing would otherwise build a module
# with no kernels in it.
REQUIRED = [os.path.join("csrc", "core", "cxx_shim", "string"), os.path.join("csrc", "module.c"),
            os.path.join("kernels", "attention", "attention.h")]
# Undefined symbols of these prefixes are ours (our C, our kernels, the static CUDA runtime):
# nothing at run time provides them.
OWN_PREFIXES = ("gp_", "cuda", "__cuda")


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
        f"Looked in: {looked}. Install the CUDA toolkit (13.0 or newer) or set CUDA_HOME."
    )


def cuda_version(home):
    """(major, minor) of the toolkit at `home`, from CUDART_VERSION in cuda_runtime_api.h."""
    with open(os.path.join(home, "include", "cuda_runtime_api.h"), encoding="utf-8", errors="replace") as f:
        found = re.search(r"^#define\s+CUDART_VERSION\s+(\d+)", f.read(), re.M)
    if found is None:
        sys.exit(f"gpuprofile: no CUDART_VERSION in {home}/include/cuda_runtime_api.h")
    number = int(found.group(1))
    return number // 1000, number % 1000 // 10


def check_cuda_version(home):
    version = cuda_version(home)
    if version < CUDA_MIN:
        sys.exit(f"gpuprofile: the CUDA toolkit at {home} is {version[0]}.{version[1]}; gpuprofile "
                 f"needs {CUDA_MIN[0]}.{CUDA_MIN[1]} or newer (set CUDA_HOME to a newer one)")


def check_sources(root=ROOT):
    """Exit naming what is missing when the source tree lacks the kernels or another required file."""
    missing = [p for p in REQUIRED if not os.path.isfile(os.path.join(root, p))]
    if not glob(os.path.join(root, "kernels", "**", "*.cu"), recursive=True):
        missing.append(os.path.join("kernels", "**", "*.cu"))
    if missing:
        sys.exit(f"gpuprofile: incomplete source tree at {root}: missing {', '.join(missing)}. "
                 "An sdist must be built from a checkout with MANIFEST.in (python -m build --sdist).")


def undefined_own_symbols(library):
    """Our symbols (OWN_PREFIXES) that `library` leaves undefined; None when nm cannot be run."""
    found = undefined_symbols(library)
    return None if found is None else sorted({name for name, _ in found if name.startswith(OWN_PREFIXES)})


def undefined_symbols(library):
    """(name, version or None) of each symbol `library` needs from elsewhere (strong references
    only, by `nm -D --undefined-only`); None when nm cannot be run."""
    try:
        out = subprocess.run(["nm", "-D", "--undefined-only", library], capture_output=True,
                             text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    found = []
    for line in out.splitlines():
        fields = line.split()
        if len(fields) >= 2 and fields[-2] == "U":
            name, _, version = fields[-1].partition("@")
            found.append((name, version.lstrip("@") or None))
    return found


def parse_glibc(text):
    """(2, 28) from "2.28"; sys.exit naming the variable for anything else."""
    found = re.fullmatch(r"2\.(\d+)", text.strip())
    if found is None:
        sys.exit(f"gpuprofile: GPUPROFILE_GLIBC must be a glibc version like 2.28, got {text!r}")
    return 2, int(found.group(1))


def glibc_link_problems(undefined, glibc):
    """What would stop a module that needs `undefined` ((name, version) pairs) from loading on
    glibc `glibc`, a (major, minor) pair: a symbol of a newer glibc, or one that no library of the
    link defines (it has no version), other than CPython's API, which the interpreter provides."""
    problems = []
    for name, version in undefined:
        if version is None:
            if not name.startswith(("Py", "_Py")):
                problems.append(f"{name} (defined by no library of the link)")
            continue
        found = re.fullmatch(r"GLIBC_(\d+)\.(\d+)(?:\.\d+)?", version)
        if found is not None and (int(found.group(1)), int(found.group(2))) > glibc:
            problems.append(f"{name}@{version}")
        elif found is None and version.startswith("GLIBC_"):  # GLIBC_PRIVATE
            problems.append(f"{name}@{version}")
    return problems


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


def up_to_date(target, deps):
    """Whether `target` exists and is newer than every file of `deps`."""
    try:
        built = os.path.getmtime(target)
    except OSError:
        return False
    return max(map(os.path.getmtime, deps)) < built


def flags_key(*parts):
    """A short name for a set of compiler flags: objects built with other flags never mix."""
    return hashlib.sha256(repr(parts).encode()).hexdigest()[:16]


def drop_stale_module(library, objects, stamp=None):
    """Removes the built module when an object it links but does not compile itself (a kernel,
    libcudart_static.a) is newer, so that setuptools links it again: setuptools relinks only when
    a source or a depend is newer than the module, and the objects cannot be depends (it passes
    those to every C compile as headers, which would rebuild all C sources after any kernel).
    Without this a kernel that changed alone was compiled and never linked in. Also where the
    objects are others than the module was linked with (`stamp`, a file listing them): a build
    with other kernel flags (GPUPROFILE_ATTN_LAB) links another folder's older objects. True if
    removed."""
    linked = None
    if stamp is not None and os.path.exists(stamp):
        with open(stamp, encoding="utf-8") as f:
            linked = f.read().splitlines()
    other = stamp is not None and linked != list(objects)
    if os.path.exists(library) and (other or not up_to_date(library, objects)):
        os.remove(library)
        return True
    return False


class BuildExt(build_ext):
    """Compile kernels/**/*.cu with nvcc and csrc/**/*.c with the C compiler, each in parallel and
    only where an object is out of date, then link them into the C extension."""

    def finalize_options(self):
        self.own_build_temp = self.build_temp is None  # not given with --build-temp
        super().finalize_options()

    def build_extensions(self):
        check_sources()
        home = find_cuda()
        check_cuda_version(home)
        libdir = cuda_lib_dir(home)
        ext = self.extensions[0]
        ext.include_dirs.append(os.path.join(home, "include"))
        ext.define_macros.append(("GP_BUILD_CUDA_HOME", '"%s"' % home))
        if self.own_build_temp:
            key = flags_key(self.compiler.compiler_so, ext.extra_compile_args, ext.define_macros,
                            ext.include_dirs, self.include_dirs, sys.version)
            self.build_temp = os.path.join(ROOT, "build", "c", f"{sys.implementation.cache_tag}-{key}")
        ext.extra_objects = self.compile_cuda(home) + [os.path.join(libdir, "libcudart_static.a")]
        self.glibc = None
        if os.environ.get("GPUPROFILE_GLIBC"):
            self.link_for_glibc(ext, parse_glibc(os.environ["GPUPROFILE_GLIBC"]))
        self.compile_changed_only()
        super().build_extensions()

    def link_for_glibc(self, ext, glibc):
        """Links with zig's linker against the symbols of glibc `glibc` (zig ships stubs of each
        glibc from 2.17 on), so that the module loads on that glibc and newer whatever this machine's
        is: the objects are this machine's compilers', the symbol versions they bind to are the
        old glibc's. libstdc++ and libgcc_s stay shared libraries (the manylinux policies allow
        them, at the versions checked after the link); `-lstdc++` would make zig link its own
        libc++ instead."""
        import importlib.util

        if importlib.util.find_spec("ziglang") is None:
            sys.exit("gpuprofile: GPUPROFILE_GLIBC needs zig's linker: pip install ziglang")
        target = f"{platform.machine()}-linux-gnu.{glibc[0]}.{glibc[1]}"
        self.compiler.set_executable("linker_so", [sys.executable, "-m", "ziglang", "cc", "-target", target,
                                                   "-shared"])
        cc = self.compiler.compiler_so[0]
        for name in ("libstdc++.so.6", "libgcc_s.so.1"):
            path = subprocess.run([cc, f"-print-file-name={name}"], capture_output=True, text=True).stdout.strip()
            if not os.path.isabs(path):
                sys.exit(f"gpuprofile: {cc} does not know where {name} is (GPUPROFILE_GLIBC)")
            ext.extra_objects.append(os.path.realpath(path))
        ext.libraries = [lib for lib in ext.libraries if lib != "stdc++"]
        self.glibc = glibc
        print(f"gpuprofile: linking for glibc {glibc[0]}.{glibc[1]} ({target}) with zig", flush=True)

    def compile_changed_only(self):
        """Makes the compiler skip sources whose object is up to date, and compile the rest in
        parallel; setuptools' own compile() runs every source, one at a time."""
        compile_all = self.compiler.compile

        def compile_changed(sources, output_dir=None, depends=(), **kwargs):
            objects = self.compiler.object_filenames(sources, output_dir=output_dir)
            stale = [src for src, obj in zip(sources, objects, strict=True)
                     if self.force or not up_to_date(obj, [src, *depends])]
            print(f"gpuprofile: compiling {len(stale)} of {len(sources)} C sources in {output_dir}",
                  flush=True)
            with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
                list(pool.map(lambda src: compile_all([src], output_dir=output_dir, depends=depends,
                                                      **kwargs), stale))
            return objects

        self.compiler.compile = compile_changed

    def build_extension(self, ext):
        library = self.get_ext_fullpath(ext.name)
        stamp = os.path.join(self.build_temp, "linked-objects.txt")
        drop_stale_module(library, ext.extra_objects, stamp)
        super().build_extension(ext)
        os.makedirs(self.build_temp, exist_ok=True)
        with open(stamp, "w", encoding="utf-8") as f:
            f.write("\n".join(ext.extra_objects) + "\n")
        undefined = undefined_own_symbols(library)
        if undefined is None:
            print("gpuprofile: warning: nm not found; undefined symbols of the module not checked",
                  file=sys.stderr)
        elif undefined:
            os.remove(library)
            sys.exit(f"gpuprofile: {library} leaves undefined: {', '.join(undefined[:10])}"
                     f"{' ...' if len(undefined) > 10 else ''} (a kernel or C source was not built)")
        if self.glibc is not None:
            needed = undefined_symbols(library)
            if needed is None:
                sys.exit("gpuprofile: GPUPROFILE_GLIBC needs nm (binutils) to check the link")
            problems = glibc_link_problems(needed, self.glibc)
            if problems:
                os.remove(library)
                sys.exit(f"gpuprofile: {library} would not load on glibc {self.glibc[0]}.{self.glibc[1]}: "
                         f"it needs {', '.join(problems)}")

    def compile_cuda(self, home):
        nvcc = os.path.join(home, "bin", "nvcc")
        extra = shlex.split(os.environ.get("GPUPROFILE_NVCC_FLAGS", ""))
        flags = ["-O3", "-std=c++17", "-lineinfo", "-Xcompiler", "-fPIC,-fvisibility=hidden"]
        flags += ["--expt-relaxed-constexpr", "-Ikernels", *extra]
        if os.environ.get("GPUPROFILE_ATTN_LAB", "0") not in ("", "0"):
            flags += ["-DGP_ATTN_LAB=1"]
        if os.environ.get("CUDAHOSTCXX"):
            flags += ["-ccbin", os.environ["CUDAHOSTCXX"]]
        # one folder per nvcc and flags: objects of other flags are never mixed in
        cache = os.environ.get("GPUPROFILE_KERNEL_CACHE") or os.path.join(ROOT, "build", "kernels")
        specific = [f for a in sorted(set(ARCH_SPECIFIC.values())) for f in gencode_flags(a)]
        out_dir = os.path.join(os.path.abspath(cache), flags_key(nvcc, *flags, *gencode_flags(), *specific))
        os.makedirs(out_dir, exist_ok=True)
        sources = sorted(glob(os.path.join("kernels", "**", "*.cu"), recursive=True))
        headers = [h for ext in ("h", "cuh") for h in glob(os.path.join("kernels", "**", f"*.{ext}"), recursive=True)]
        jobs, objects = [], []
        for src in sources:
            obj = os.path.join(out_dir, os.path.relpath(src, "kernels").replace(os.sep, "_") + ".o")
            objects.append(obj)
            if self.force or not up_to_date(obj, [src, *headers]):
                jobs.append([nvcc, *flags, *gencode_flags(ARCH_SPECIFIC.get(src)), "-c", src, "-o", obj])
        print(f"gpuprofile: compiling {len(jobs)} of {len(sources)} kernels with nvcc in {out_dir}", flush=True)

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
    libraries=["dl", "pthread", "rt", "m", "stdc++"],
    define_macros=[("PY_SSIZE_T_CLEAN", None)],
    depends=glob("csrc/**/*.h", recursive=True) + glob("kernels/**/*.h", recursive=True)
    + [os.path.join("csrc", "core", "cxx_shim", "string")],
)

def check_setuptools():
    """pyproject.toml's license is an SPDX expression, which setuptools reads from 77 on; an older
    one (a venv's bundled copy, under --no-build-isolation) would fail on it with a schema error."""
    import setuptools

    found = tuple(int(p) for p in re.findall(r"\d+", setuptools.__version__)[:2])
    if found < (77, 0):
        sys.exit(f"gpuprofile: setuptools {setuptools.__version__} is too old to build it (77 or newer): "
                 "pip install -U 'setuptools>=77', or build without --no-build-isolation")


if __name__ == "__main__":  # setuptools runs this file as __main__; tests import its checks
    check_setuptools()
    setup(ext_modules=[extension], cmdclass={"build_ext": BuildExt})
