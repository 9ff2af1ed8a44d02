"""What the subcommands' mains share: the exit statuses, an error line, --json and --csv output."""

from __future__ import annotations

import sys

# Exit statuses of every subcommand (docs/cli.md#exit-status): 1 only ever means the measurement
# said no (a regression beyond the gate, a kernel's wrong output), so that CI can tell it from a
# command that could not do its job (2: bad arguments or input, no device, an output it cannot
# write). `gpuprofile run` and the script runners pass the script's own non-zero status on.
OK, FAILED, ERROR, STRICT = 0, 1, 2, 3


def error(prog: str, message: str, code: int) -> int:
    """Prints '<prog>: error: <message>' to stderr; returns `code` (the exit status)."""
    print(f"{prog}: error: {message}", file=sys.stderr)
    return code


def write_json(prog: str, path: str, data) -> int:
    """Writes `data` as strict JSON to `path`, atomically (gpuprofile._files): 0, or ERROR after
    an error line when it cannot be written."""
    from ._files import write_json as write

    try:
        write(path, data)
    except OSError as e:
        return error(prog, f"cannot write {path}: {e}", ERROR)
    return 0


def unwritable(prog: str, *paths) -> int:
    """0 when a file can be written at each given path (None: not asked for), else ERROR after
    an error line: checked before a long measurement, not after."""
    from ._files import check_writable

    for path in paths:
        if path is None:
            continue
        try:
            check_writable(path)
        except OSError as e:
            return error(prog, f"cannot write {path}: {e.strerror}", ERROR)
    return 0


def write_csv(prog: str, path: str, result) -> int:
    """Writes a table-like result (gpuprofile._tables.Tabular) as CSV to `path`, atomically: 0
    after a note on stderr, or ERROR after an error line when it cannot be written."""
    try:
        result.to_csv(path)
    except OSError as e:
        return error(prog, f"cannot write {path}: {e}", ERROR)
    print(f"{prog}: table written to {path}", file=sys.stderr)
    return 0
