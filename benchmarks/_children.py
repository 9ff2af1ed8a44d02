"""Running a benchmark's own child processes: one configuration per process (one CUPTI client
per process, no residue from an earlier one), its result the last line of its stdout as JSON."""

from __future__ import annotations

import json
import os
import subprocess
import sys


def write_json(path: str, data) -> None:
    """`data` as JSON at `path`: written to a temporary file in the same folder, flushed, fsynced
    and renamed into place, so that an interrupted run leaves no partial file."""
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        with open(tmp, "w") as f:
            json.dump(data, f, indent=1)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def run_child(script: str, args: list, timeout: int, error_lines: int = 1) -> dict:
    """`python script --child *args`: its JSON result, or {"error": [last lines of its output]}
    when it failed or ran past `timeout` seconds."""
    cmd = [sys.executable, script, "--child", *args]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": [f"timed out after {timeout} s"]}
    if proc.returncode != 0:
        return {"error": (proc.stderr or proc.stdout).strip().splitlines()[-error_lines:]}
    return json.loads(proc.stdout.strip().splitlines()[-1])
