"""What a type checker sees through gpuprofile's lazy loader: mypy, run on a small file with
reveal_type, must see the real functions and classes, not Any (skipped without mypy)."""

import ast
import os
import pathlib
import re
import subprocess
import sys

import pytest

import gpuprofile as gp

PROGRAM = '''
import gpuprofile as gp

@gp.region
def step(x: int) -> str:
    return str(x)

reveal_type(gp.benchmark)
reveal_type(gp.benchmark(step, 1))
reveal_type(gp.metrics)
reveal_type(gp.profile())
reveal_type(gp.profile().summary())
reveal_type(gp.do_bench(lambda: None))
reveal_type(gp.BenchmarkResult)
reveal_type(gp.compare)
reveal_type(gp.stalls)
reveal_type(gp.merge_traces)
reveal_type(gp.rank_info())
reveal_type(gp.report())
reveal_type(gp.stats("x"))
reveal_type(step)
reveal_type(gp.region("x"))
reveal_type(gp.profile(schedule=gp.schedule(wait=1, warmup=1, active=2)))
reveal_type(gp.profile(on_trace_ready=print))
reveal_type(gp.profile(memory=False).summary(sort_by="calls", row_limit=5))
'''

EXPECTED = [
    r"def \(fn: Any, \*args: Any, .*\) -> gpuprofile\.bench\.result\.BenchmarkResult",
    r"gpuprofile\.bench\.result\.BenchmarkResult",
    r"def \(fn: Any, \*args: Any, .*\) -> gpuprofile\.counters\.result\.MetricsResult",
    r"gpuprofile\.tracing\.profile\.Profile",
    r"gpuprofile\.tracing\.summary\.Summary",
    r"float \| list\[Any\]",
    r"def \(name: str, .*\) -> gpuprofile\.bench\.result\.BenchmarkResult",
    r"def \(results: Any, baseline: Any =, threshold: Any =\) -> gpuprofile\.bench\.result\.Comparison",
    r"def \(fn: Any, \*args: Any, .*\) -> gpuprofile\.counters\.stalls\.StallReport",
    r"def \(paths: Any, output: Any, .*\) -> gpuprofile\.tracing\.merge\.MergeResult",
    r".*gpuprofile\.distributed\.RankInfo.*",  # a NamedTuple
    r"gpuprofile\.regions\.Report",
    r"gpuprofile\.regions\.RegionStats",
    r"def \(x: int\) -> str",
    r"gpuprofile\._C\.region",
    r"gpuprofile\.tracing\.schedule\.ScheduledProfile",
    r"gpuprofile\.tracing\.schedule\.ScheduledProfile",
    r"gpuprofile\.tracing\.summary\.Summary",
]


def test_every_lazy_name_is_imported_for_type_checkers():
    tree = ast.parse(pathlib.Path(gp.__file__).read_text(encoding="utf-8"))
    (block,) = [node for node in tree.body if isinstance(node, ast.If)
                and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"]
    imported = {alias.asname or alias.name for node in block.body
                if isinstance(node, ast.ImportFrom) for alias in node.names}
    assert set(gp._LAZY) | set(gp._LAZY_MODULES) <= imported


def test_mypy_sees_the_lazy_names_typed(tmp_path):
    pytest.importorskip("mypy")
    (tmp_path / "uses.py").write_text(PROGRAM)
    env = dict(os.environ)
    parent = os.path.dirname(os.path.dirname(gp.__file__))
    if os.path.basename(parent) not in ("site-packages", "dist-packages"):
        env["MYPYPATH"] = parent  # a source checkout (editable install): mypy can't see its finder
    out = subprocess.run([sys.executable, "-m", "mypy", "--no-error-summary", "--follow-imports=silent",
                          "--cache-dir", str(tmp_path / "cache"), "uses.py"],
                         capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300)
    revealed = re.findall(r'Revealed type is "(.*)"', out.stdout)
    assert len(revealed) == len(EXPECTED), out.stdout + out.stderr
    for got, want in zip(revealed, EXPECTED, strict=True):
        got = got.replace("builtins.", "")  # mypy versions differ in spelling builtins
        assert got != "Any" and re.fullmatch(want, got), (got, want)
    assert "error" not in out.stdout, out.stdout
