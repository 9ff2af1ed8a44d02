"""Writes the two generated blocks of gpuprofile/__init__.py from their one source each:

- the typing overloads of gp.profile(), from tracing/options.py's ProfileOptions dataclass (the
  overloads exist only so that schedule= or on_trace_ready= types as a ScheduledProfile);
- the TYPE_CHECKING imports of the names __getattr__ loads lazily, from _LAZY and _LAZY_MODULES.

    python tools/init_stubs.py           # rewrite the blocks in place
    python tools/init_stubs.py --check   # exit 1 if they are stale (tests/test_types.py runs this)

Each block sits between a "# BEGIN generated: <what>" and an "# END generated" line; nothing else
in the file is touched. Runs from a source checkout without the extension built: it reads _LAZY
with ast and the dataclass from tracing/options.py, which imports nothing of gpuprofile."""

from __future__ import annotations

import ast
import dataclasses
import importlib.util
import json
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
INIT = ROOT / "gpuprofile" / "__init__.py"

# the overloads: (schedule, on_trace_ready, return type); the last two need one of them given
_CASES = (
    ("*, schedule: None = None", "on_trace_ready: None = None", "Profile"),
    ("*, schedule: Schedule", "on_trace_ready: Callable[[ScheduledProfile], object] | None = None",
     "ScheduledProfile"),
    ("*, schedule: Schedule | None = None", "on_trace_ready: Callable[[ScheduledProfile], object]",
     "ScheduledProfile"),
)


def _options():
    spec = importlib.util.spec_from_file_location(
        "_gp_options", ROOT / "gpuprofile" / "tracing" / "options.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses looks the module up while building the class
    spec.loader.exec_module(module)
    return dataclasses.fields(module.ProfileOptions)


def overloads() -> list:
    """The lines of gp.profile()'s overloads, one per (schedule, on_trace_ready) case."""
    params = [f"{f.name}: {f.type} = {json.dumps(f.default)}" if isinstance(f.default, str)
              else f"{f.name}: {f.type} = {f.default!r}" for f in _options()]
    lines = []
    for schedule, ready, returns in _CASES:
        lines.append("@overload")
        lines.append("def profile(")
        lines += [f"    {p}," for p in params]
        lines += [f"    {schedule},", f"    {ready},", f") -> {returns}: ..."]
    return lines


def lazy_imports(source: str) -> list:
    """The TYPE_CHECKING imports of every name in _LAZY and module in _LAZY_MODULES."""
    tree = ast.parse(source)
    values = {t.id: ast.literal_eval(node.value) for node in tree.body
              if isinstance(node, ast.Assign) for t in node.targets
              if isinstance(t, ast.Name) and t.id in ("_LAZY", "_LAZY_MODULES")}
    rows = [("", m) for m in values["_LAZY_MODULES"]] + [
        (module, name) for name, module in values["_LAZY"].items()]
    # in isort's order (ruff's I001): by module, then by name, case-sensitively
    return [f"from .{module} import {name} as {name}" for module, name in sorted(rows)]


def _replace(text: str, what: str, lines: list, indent: str) -> str:
    pattern = re.compile(rf"(?m)^([ \t]*# BEGIN generated: {re.escape(what)}[^\n]*\n)(.*?)(^[ \t]*# END generated\n)",
                         re.S)
    if not pattern.search(text):
        raise SystemExit(f"{INIT}: no '# BEGIN generated: {what}' block")
    body = "".join(f"{indent}{line}\n" for line in lines)
    return pattern.sub(lambda m: m.group(1) + body + m.group(3), text, count=1)


def generate(text: str) -> str:
    text = _replace(text, "profile overloads", overloads(), "")
    return _replace(text, "lazy names", lazy_imports(text), "    ")


def main(argv: list) -> int:
    text = INIT.read_text(encoding="utf-8")
    new = generate(text)
    if "--check" in argv:
        if new != text:
            print(f"{INIT} is stale: run python tools/init_stubs.py", file=sys.stderr)
            return 1
        return 0
    if new != text:
        INIT.write_text(new, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
