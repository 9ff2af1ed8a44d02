"""The pytest plugin's storage folder: numbered runs per machine, as pytest-benchmark keeps them.

    .gpu_benchmarks/Linux-CPython-3.12-NVIDIA_H100_80GB_HBM3/
        0001_3f2c9e1d..._20261125_101500.json        --gpu-benchmark-autosave
        0002_3f2c9e1d..._20261125_103012_uncommitted-changes.json
        0003_before-fix.json                          --gpu-benchmark-save=before-fix

A run's number is one more than the highest in its machine's folder, reserved when the run
begins (Storage.reserve: a file `.NNNN.reserved` created exclusively, removed once the run is
saved), so that pytest runs started at once each get their own; --gpu-benchmark-compare=3
reads run 3 there, a bare --gpu-benchmark-compare the newest. Each file carries the machine
(host, Python, GPU, driver, CUDA), the commit and the date (machine_info(), commit_info()).
Nothing here touches the GPU unless a device is present, and nothing raises for a missing
driver, git or repository: what cannot be read is said in the file instead.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import os
import platform
import re
import subprocess

DEFAULT_STORAGE = ".gpu_benchmarks"
_RUN = re.compile(r"^(\d{4,})_.*\.json$")
_RESERVED = re.compile(r"^\.(\d{4,})(\.rank\d+)?\.reserved$")


def _read_text(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return None


def _cuda_version(v: int) -> str | None:
    return f"{v // 1000}.{v % 1000 // 10}" if v else None


def gpu_info() -> dict:
    """The GPU, its driver and CUDA versions: gpu (name or None), gpu_count, compute_capability,
    nvidia_driver (the kernel module's version, from /proc), cuda_driver (the CUDA version the
    driver supports), cuda_runtime (the one gpuprofile was built with). Never raises."""
    from .. import _C

    out = {"gpu": None, "gpu_count": 0, "compute_capability": None, "nvidia_driver": None,
           "cuda_driver": None, "cuda_runtime": _cuda_version(_C.build_cuda_version)}
    try:
        status = _C._cuda_status()
        out["cuda_driver"] = _cuda_version(status["driver_version"])
        out["gpu_count"] = status["device_count"]
        if status["device_count"]:
            from ..device import device_info

            d = device_info(0)
            out["gpu"], out["compute_capability"] = d.name, "{}.{}".format(*d.compute_capability)
    except Exception as e:  # a broken driver is said, not raised: the run still saves
        out["gpu_error"] = str(e)
    text = _read_text("/proc/driver/nvidia/version")
    found = re.search(r"Kernel Module\s+(?:for \S+\s+)?([0-9][0-9.]*)", text or "")
    if found:
        out["nvidia_driver"] = found.group(1)
    return out


def machine_info() -> dict:
    """pytest-benchmark's machine_info keys (node, processor, machine, python_compiler,
    python_implementation, python_version, release, system) and gpu_info()'s."""
    return {
        "node": platform.node(), "processor": platform.processor(), "machine": platform.machine(),
        "python_compiler": platform.python_compiler(),
        "python_implementation": platform.python_implementation(),
        "python_version": platform.python_version(), "release": platform.release(),
        "system": platform.system(), **gpu_info(),
    }


def _stale(reservation: str) -> bool:
    """Whether the process that wrote `reservation` is gone (one not yet written is not)."""
    try:
        with open(reservation, encoding="ascii") as f:
            pid = int(f.read().strip() or 0)
    except (OSError, ValueError):
        return False
    if pid <= 0 or pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False
    return False


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9.+-]+", "_", text).strip("_") or "unknown"


def machine_id(info: dict) -> str:
    """The folder name of a machine: system, Python implementation and version (major.minor),
    and the GPU ('no_gpu' without one): Linux-CPython-3.12-NVIDIA_H100_80GB_HBM3."""
    version = ".".join(str(info.get("python_version", "")).split(".")[:2])
    parts = [info.get("system") or "unknown", info.get("python_implementation") or "unknown",
             version or "unknown", info.get("gpu") or "no_gpu"]
    return "-".join(_safe(str(p)) for p in parts)


def _git(args, cwd) -> str:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=10,
                          check=True).stdout.strip()


def commit_info(cwd=None) -> dict:
    """pytest-benchmark's commit_info: id, time (ISO), author_time, dirty, project, branch;
    {'error': ...} outside a git repository or without git."""
    cwd = os.fspath(cwd) if cwd is not None else os.getcwd()
    try:
        commit = _git(["rev-parse", "HEAD"], cwd)
        times = _git(["log", "-1", "--format=%cI%n%aI"], cwd).splitlines()
        dirty = bool(_git(["status", "--porcelain", "--untracked-files=no"], cwd))
        branch = _git(["rev-parse", "--abbrev-ref", "HEAD"], cwd)
        top = _git(["rev-parse", "--show-toplevel"], cwd)
    except (OSError, subprocess.SubprocessError) as e:
        why = e.stderr.strip() if isinstance(e, subprocess.CalledProcessError) and e.stderr else str(e)
        return {"error": f"no git commit: {why}"}
    return {"id": commit, "time": times[0] if times else None,
            "author_time": times[1] if len(times) > 1 else None, "dirty": dirty,
            "project": os.path.basename(top), "branch": branch}


def now_iso() -> str:
    """The date of a run: UTC, ISO 8601."""
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


class Storage:
    """The runs of one machine: `root`/`machine`/NNNN_*.json."""

    def __init__(self, root, machine: str):
        root = os.fspath(root)
        # absolute: a test that changes the working folder still saves where the run began
        self.root = os.path.abspath(root[len("file://"):] if root.startswith("file://") else root)
        self.machine = machine
        self.folder = os.path.join(self.root, machine)

    def runs(self) -> list:
        """[(number, path)] of the saved runs, oldest first. In a multi-rank job each rank saves
        NNNN_name.rankR.json: those files are one run, listed by the path without the rank
        (distributed.rank_path gives each rank its own)."""
        try:
            names = os.listdir(self.folder)
        except FileNotFoundError:
            return []
        found = set()
        for name in names:
            m = _RUN.match(name)
            if m:
                base = re.sub(r"\.rank\d+\.json$", ".json", name)
                found.add((int(m.group(1)), os.path.join(self.folder, base)))
        return sorted(found)

    def new_path(self, name: str | None, commit: dict, date: str) -> str:
        """The file of a new run: NNNN_NAME.json for --gpu-benchmark-save=NAME, else
        NNNN_<commit>_<date>[_uncommitted-changes].json (autosave). Nothing is reserved: see
        reserve()."""
        number = max((n for n, _ in self.runs()), default=0) + 1
        return self._path(number, name, commit, date)

    def _path(self, number: int, name: str | None, commit: dict, date: str) -> str:
        if name is None:
            stamp = re.sub(r"[^0-9T]", "", date[:19]).replace("T", "_")
            parts = [commit.get("id") or "unversioned", stamp]
            if commit.get("dirty"):
                parts.append("uncommitted-changes")
            name = "_".join(parts)
        return os.path.join(self.folder, f"{number:04d}_{_safe(name)}.json")

    def reserve(self, name: str | None, commit: dict, date: str, rank_tag: str = "") -> tuple:
        """(path, reservation): new_path()'s file under a number no other run holds, saved or
        being measured. The number is taken by creating `.NNNN<rank_tag>.reserved` exclusively
        (the next number when another process got there first); remove the reservation once
        the run is saved, or not. The ranks of one job (rank_tag '.rankR') share a number: a
        rank's reservation does not hold the others'. A reservation whose process is gone is
        removed here. OSError when the folder does not take the file."""
        os.makedirs(self.folder, exist_ok=True)
        number = max([n for n, _ in self.runs()] + self._reserved(rank_tag), default=0) + 1
        while True:
            reservation = os.path.join(self.folder, f".{number:04d}{rank_tag}.reserved")
            try:
                fd = os.open(reservation, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            except FileExistsError:
                number += 1
                continue
            with os.fdopen(fd, "w") as f:
                f.write(str(os.getpid()))
            if any(n == number for n, _ in self.runs()):  # saved meanwhile by a run not reserving
                os.remove(reservation)
                number += 1
                continue
            return self._path(number, name, commit, date), reservation

    def _reserved(self, rank_tag: str) -> list:
        """Numbers held by reservations that bind a run with `rank_tag`: every reservation for a
        single-process run ('' ), its own rank's and single-process ones for a rank of a job.
        Stale ones (their process is gone) are removed instead."""
        try:
            names = os.listdir(self.folder)
        except OSError:
            return []
        out = []
        for name in names:
            m = _RESERVED.match(name)
            if m is None or rank_tag and (m.group(2) or "") not in ("", rank_tag):
                continue
            path = os.path.join(self.folder, name)
            if _stale(path):
                with contextlib.suppress(OSError):
                    os.remove(path)
                continue
            out.append(int(m.group(1)))
        return out

    def find(self, spec: str) -> str:
        """The file a --gpu-benchmark-compare value names: 'latest' (the newest run), a run
        number (3 or 0003), or a path. FileNotFoundError naming what was looked for."""
        if spec == "latest":
            runs = self.runs()
            if not runs:
                raise FileNotFoundError(f"no saved run in {self.folder} to compare with (save one "
                                        "with --gpu-benchmark-autosave)")
            return runs[-1][1]
        if spec.isdigit():
            matches = [p for n, p in self.runs() if n == int(spec)]
            if not matches:
                raise FileNotFoundError(f"no run numbered {spec} in {self.folder}")
            if len(matches) > 1:
                raise FileNotFoundError(f"several runs numbered {spec} in {self.folder}: "
                                        f"{[os.path.basename(p) for p in matches]}; give a path")
            return matches[0]
        if not os.path.isfile(spec):
            raise FileNotFoundError(f"{spec}: no such file (a run number, or the path of a saved "
                                    "run or a JSON file)")
        return spec
