"""What the subcommands' mains share: an error line with an exit status, and --json output."""

from __future__ import annotations

import sys


def error(prog: str, message: str, code: int) -> int:
    """Prints '<prog>: error: <message>' to stderr; returns `code` (the exit status)."""
    print(f"{prog}: error: {message}", file=sys.stderr)
    return code


def write_json(prog: str, path: str, data) -> int:
    """Writes `data` as strict JSON to `path`, atomically (gpuprofile._files): 0, or 1 after an
    error line when it cannot be written."""
    from ._files import write_json as write

    try:
        write(path, data)
    except OSError as e:
        return error(prog, f"cannot write {path}: {e}", 1)
    return 0
