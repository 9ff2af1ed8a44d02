"""Running a user's Python script in this process, as `python script.py args` would (for the
`run`, `metrics` and `stalls` subcommands): __main__, sys.argv and sys.path[0] set, restored after."""

from __future__ import annotations

import os
import sys


def run_script(script: str, args: list, prog: str = "gpuprofile run") -> int:
    """Runs `script` as __main__ with `args`; its exit code (tracebacks printed, not raised)."""
    import runpy
    import traceback

    saved_argv, saved_path = sys.argv, list(sys.path)
    sys.argv = [script, *args]
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    try:
        runpy.run_path(script, run_name="__main__")
        return 0
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
    except BaseException:
        traceback.print_exc()
        return 1
    finally:
        sys.argv, sys.path[:] = saved_argv, saved_path
