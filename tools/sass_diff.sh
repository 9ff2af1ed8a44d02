#!/usr/bin/env bash
# Compares the SASS of every kernel in two builds, function by function: the check behind "SASS
# identical, every kernel" for a change of device code that must not change what runs (a refactor,
# a file split, a table that now drives the template arguments). No GPU needed.
#
#   tools/sass_diff.sh OLD NEW
#
# OLD and NEW are each a git revision (its kernels/**/*.cu compiled here into a temporary folder
# with setup.py's own nvcc flags, GPUPROFILE_CUDA_ARCHS, GPUPROFILE_NVCC_FLAGS and
# GPUPROFILE_ATTN_LAB included), "WORKTREE" (this checkout's kernels, compiled the same way), a
# built module (gpuprofile/_C*.so), a kernel object (.o) or a folder of them (build/kernels/<key>,
# GPUPROFILE_KERNEL_CACHE/<key>). Example, a change on its branch against main:
#
#   tools/sass_diff.sh main WORKTREE
#
# A kernel is named by its source file (the fatbin's identifier), its architecture and its
# mangled name, the per-file hash of the anonymous namespace left out (nvcc derives it from the
# file, so any edit changes it). Prints one line per kernel that differs, is only in OLD or only
# in NEW, then a count; exit 0 when every kernel in both builds has identical SASS (instruction
# encodings included) and neither has a kernel the other lacks, 1 otherwise, 2 on a usage or build
# error. `--allow-removed` accepts kernels only in OLD (a build that ships fewer configurations):
# they are listed, and the exit status then says whether every kernel NEW has is identical.
# `--keep DIR` leaves the objects it compiled in DIR/old and DIR/new (a folder argument then).
#
# cuobjdump and nvdisasm come from the CUDA toolkit ($CUDA_HOME/bin) or PyPI's
# nvidia-cuda-cuobjdump and nvidia-cuda-nvdisasm wheels (pip install "nvidia-cuda-cuobjdump==13.*"
# "nvidia-cuda-nvdisasm==13.*"), found on PATH, beside nvcc, or in the active Python's packages.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
exec python3 - "$ROOT" "$@" <<'PY'
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
import types

root, argv = sys.argv[1], sys.argv[2:]
allow_removed = "--allow-removed" in argv
argv = [a for a in argv if a != "--allow-removed"]
keep = None
if "--keep" in argv[:-1]:
    at = argv.index("--keep")
    keep = os.path.abspath(argv[at + 1])
    del argv[at:at + 2]
if len(argv) != 2:
    sys.exit("usage: tools/sass_diff.sh [--allow-removed] [--keep DIR] OLD NEW (a git revision, "
             "WORKTREE, a .so, a .o or a folder of .o)")


def tool(name):
    """cuobjdump or nvdisasm: on PATH, beside nvcc, or from the nvidia-cuda-* wheels."""
    found = shutil.which(name)
    if found:
        return found
    for home in (os.environ.get("CUDA_HOME"), "/usr/local/cuda"):
        if home and os.path.isfile(os.path.join(home, "bin", name)):
            return os.path.join(home, "bin", name)
    import site

    for base in site.getsitepackages() + [site.getusersitepackages()]:
        for path in glob.glob(os.path.join(base, "nvidia", "*", "bin", name)):
            return path
    sys.stderr.write(f"sass_diff: {name} not found (CUDA toolkit, or pip install "
                     f"'nvidia-cuda-{name}==13.*')\n")
    sys.exit(2)


CUOBJDUMP = tool("cuobjdump")
os.environ["PATH"] = os.path.dirname(tool("nvdisasm")) + os.pathsep + os.environ["PATH"]


def compile_kernels(tree, out):
    """tree's kernels/**/*.cu into `out` with the nvcc flags of tree's own setup.py."""
    sys.path.insert(0, tree)
    here = os.getcwd()
    try:
        os.chdir(tree)
        import importlib

        setup = importlib.import_module("setup")
        os.environ["GPUPROFILE_KERNEL_CACHE"] = out
        fake = types.SimpleNamespace(force=False)
        objects = setup.BuildExt.compile_cuda(fake, setup.find_cuda())
    finally:
        os.chdir(here)
        sys.path.remove(tree)
        sys.modules.pop("setup", None)
    return objects


def objects_of(spec, scratch):
    os.makedirs(scratch, exist_ok=True)
    if spec == "WORKTREE":
        return compile_kernels(root, os.path.join(scratch, "worktree"))
    if os.path.isdir(spec):
        found = sorted(glob.glob(os.path.join(spec, "**", "*.o"), recursive=True))
        if not found:
            sys.exit(f"sass_diff: no .o under {spec}")
        return found
    if os.path.isfile(spec):
        return [spec]
    rev = subprocess.run(["git", "-C", root, "rev-parse", "--verify", spec + "^{commit}"],
                         capture_output=True, text=True)
    if rev.returncode != 0:
        sys.stderr.write(f"sass_diff: {spec} is neither a file, a folder nor a git revision\n")
        sys.exit(2)
    tree = os.path.join(scratch, "tree-" + rev.stdout.strip()[:12])
    subprocess.run(["git", "-C", root, "worktree", "add", "--detach", "-q", tree, rev.stdout.strip()],
                   check=True)
    try:
        return compile_kernels(tree, os.path.join(scratch, "kernels-" + rev.stdout.strip()[:12]))
    finally:
        subprocess.run(["git", "-C", root, "worktree", "remove", "--force", tree], check=False)


ANON = re.compile(r"(\d+)_GLOBAL__N__")


def normalize(text):
    """Drops the anonymous namespace's per-file hash from every mangled name in `text`."""
    out, at = [], 0
    for m in ANON.finditer(text):
        if m.start() < at:
            continue
        length = int(m.group(1))
        out.append(text[at:m.start()] + "(anon)")
        at = m.start(1) + len(m.group(1)) + length
    return "".join(out) + text[at:]


def kernels_of(objects):
    """{(source, arch, name): SASS lines} of every function in `objects`."""
    found = {}
    for obj in objects:
        dump = subprocess.run([CUOBJDUMP, "-sass", obj], capture_output=True, text=True)
        if dump.returncode != 0 and "does not contain device code" not in dump.stderr:
            sys.stderr.write(f"sass_diff: cuobjdump -sass {obj}: {dump.stderr}")
            sys.exit(2)
        source = arch = name = None
        for line in normalize(dump.stdout).splitlines():
            s = line.strip()
            if s.startswith("Fatbin "):  # the next cubin's header: the last function ended
                name = None
            elif s.startswith("identifier = "):
                source = s.split("=", 1)[1].strip()
            elif s.startswith("code for "):
                arch, name = s.split()[-1], None
            elif s.startswith("Function : "):
                name = s.split(":", 1)[1].strip()
                key = (source, arch, name)
                if key in found:
                    sys.stderr.write(f"sass_diff: {key} twice\n")
                    sys.exit(2)
                found[key] = []
            elif name is not None and s and not s.startswith("...."):
                found[(source, arch, name)].append(s)
    return found


with tempfile.TemporaryDirectory(prefix="sass_diff.") as scratch:
    if keep is not None:  # the compiled objects stay there, for another comparison
        os.makedirs(keep, exist_ok=True)
        scratch = keep
    old = kernels_of(objects_of(argv[0], os.path.join(scratch, "old")))
    new = kernels_of(objects_of(argv[1], os.path.join(scratch, "new")))

changed = sorted(k for k in old.keys() & new.keys() if old[k] != new[k])
removed, added = sorted(old.keys() - new.keys()), sorted(new.keys() - old.keys())
for label, keys in (("differs", changed), ("only in OLD", removed), ("only in NEW", added)):
    for source, arch, name in keys:
        print(f"{label}: {source} {arch} {name}")
same = len(old.keys() & new.keys()) - len(changed)
print(f"sass_diff: {len(old)} kernels in OLD, {len(new)} in NEW; {same} identical, "
      f"{len(changed)} differ, {len(removed)} only in OLD, {len(added)} only in NEW")
ok = not changed and not added and (allow_removed or not removed)
sys.exit(0 if ok else 1)
PY
