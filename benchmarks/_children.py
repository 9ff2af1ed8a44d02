"""Running a benchmark's own child processes: one configuration per process (one CUPTI client
per process, no residue from an earlier one), its result the last line of its stdout as JSON."""

from __future__ import annotations

import json
import subprocess
import sys


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
