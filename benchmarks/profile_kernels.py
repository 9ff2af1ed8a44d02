"""Trace one bundled attention kernel, with hardware counters where permitted (the seed guide's
profile_kernels.py, without torch.profiler): `gpuprofile profile-kernels` under another name.

    python benchmarks/profile_kernels.py --seq-len 512 --impl flash --trace t.json
"""

import sys

from gpuprofile.cli import main

if __name__ == "__main__":
    sys.exit(main(["profile-kernels", *sys.argv[1:]]))
