"""Registers, spills and key SASS instructions of the attention kernels; no GPU needed.

    python benchmarks/kernel_resources.py [--arch 90] [--cuobjdump PATH]

Compiles kernels/attention/attention_*.cu with the build's nvcc flags plus -Xptxas -v and prints,
per kernel: registers, spill stores/loads, stack, static shared memory; and, when cuobjdump (with
nvdisasm) is found, counts of the instructions that show the design is what it claims: HMMA
(tensor-core mma), LDSM (ldmatrix), LDGSTS (cp.async), MUFU.EX2 (exp2), LDL/STL (local memory,
which should be absent), and for the sm_90a kernel HGMMA (wgmma), UTMALDG (TMA tile loads) and
SYNCS (mbarrier operations); maxR, the highest register the SASS names (above the launch's
count only where setmaxnreg raised a warpgroup's limit, as in the sm_90a kernel's consumers).
kernels/attention/NOTES.md records its output.

attention_flash_wgmma.cu is compiled for sm_90a when --arch is 90 (as setup.py's ARCH_SPECIFIC
does); for other architectures its kernels are stubs. cuobjdump is not in every toolkit install;
pip's nvidia-cuda-cuobjdump and nvidia-cuda-nvdisasm provide both (pass --cuobjdump PATH).
"""

from __future__ import annotations

import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SASS_OPS = ("HMMA", "HGMMA", "LDSM", "LDGSTS", "UTMALDG", "SYNCS", "MUFU.EX2", "SHFL", "BAR.SYNC",
            "LDL", "STL")
# Sources built for an architecture-specific target (setup.py's ARCH_SPECIFIC): name -> arch.
ARCH_SPECIFIC = {"attention_flash_wgmma.cu": "90"}


def demangle(names):
    out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True)
    pretty = out.stdout.splitlines() if out.returncode == 0 else names
    return [re.sub(r"gp_attn::\(anonymous namespace\)::|\(gp_attn_params.*", "", p) for p in pretty]


def compile_one(nvcc, src, arch, obj):
    if ARCH_SPECIFIC.get(os.path.basename(src)) == arch.rstrip("a"):
        arch = arch.rstrip("a") + "a"
    cmd = [nvcc, "-O3", "-std=c++17", "-lineinfo", "--expt-relaxed-constexpr", "-Ikernels",
           f"-gencode=arch=compute_{arch},code=sm_{arch}", "-Xptxas", "-v", "-c", src, "-o", obj]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if proc.returncode:
        sys.exit(proc.stderr)
    rows, name, spill = {}, None, None
    for line in proc.stderr.splitlines():
        if m := re.search(r"Compiling entry function '(\S+)'", line):
            name = m.group(1)
        elif m := re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", line):
            spill = tuple(int(x) for x in m.groups())
        elif (m := re.search(r"Used (\d+) registers", line)) and name:
            smem = re.search(r"(\d+) bytes smem", line)
            rows[name] = {"regs": int(m.group(1)), "stack": spill[0], "spill_st": spill[1],
                          "spill_ld": spill[2], "smem_static": int(smem.group(1)) if smem else 0}
    return rows


def sass_counts(cuobjdump, obj):
    out = subprocess.run([cuobjdump, "--dump-sass", obj], capture_output=True, text=True)
    if out.returncode:
        return {}
    counts, name = {}, None
    for line in out.stdout.splitlines():
        if m := re.search(r"Function : (\S+)", line):
            name = m.group(1)
            counts[name] = dict.fromkeys(SASS_OPS + ("maxR",), 0)
        elif name and (m := re.search(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)([^;]*)", line)):
            op = m.group(1)
            regs = [int(r) for r in re.findall(r"\bR(\d+)\b", m.group(2))]
            counts[name]["maxR"] = max([counts[name]["maxR"], *regs])
            for key in SASS_OPS:
                if op == key or op.startswith(key + "."):
                    counts[name][key] += 1
    return counts


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--arch", default="90")
    p.add_argument("--nvcc", default=os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "bin", "nvcc"))
    p.add_argument("--cuobjdump", default=shutil.which("cuobjdump"))
    args = p.parse_args(argv)
    print(f"sm_{args.arch}; SASS counts are static (instructions in the binary, not executed)")
    header = f"{'kernel':62} {'regs':>4} {'spill st/ld':>11} {'stack':>5}"
    if args.cuobjdump:
        header += "".join(f" {op:>8}" for op in SASS_OPS + ("maxR",))
    print(header)
    with tempfile.TemporaryDirectory() as tmp:
        for src in sorted(glob.glob(os.path.join(ROOT, "kernels", "attention", "attention_*.cu"))):
            obj = os.path.join(tmp, os.path.basename(src) + ".o")
            rows = compile_one(args.nvcc, src, args.arch, obj)
            counts = sass_counts(args.cuobjdump, obj) if args.cuobjdump else {}
            for mangled, pretty in zip(rows, demangle(list(rows)), strict=True):
                r = rows[mangled]
                line = f"{pretty[:62]:62} {r['regs']:>4} {r['spill_st']:>5}/{r['spill_ld']:<5} {r['stack']:>5}"
                if mangled in counts:
                    line += "".join(f" {counts[mangled][op]:>8}" for op in SASS_OPS + ("maxR",))
                print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
