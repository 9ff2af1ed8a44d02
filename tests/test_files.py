"""gpuprofile._files: atomic writes (a writer killed or failing half way leaves the old file as it
was) and strict JSON, and the package's writers that go through them."""

import gzip
import json
import math
import os
import re
import signal
import stat
import subprocess
import sys
import time

import numpy as np
import pytest

import gpuprofile as gp
from gpuprofile._files import (
    atomic_write,
    check_writable,
    dumps_json,
    finite_or_none,
    loads_json,
    read_json,
    save_figure,
    write_json,
)


def good_result(name="good"):
    return gp.BenchmarkResult.from_dict(json.loads(json.dumps(gp.benchmark(
        sum, [1, 2, 3], clock="host", warmup=0, min_time=0.01, max_noise=0.5, name=name).to_dict())))


def test_text_bytes_and_gzip_writes(tmp_path):
    with atomic_write(tmp_path / "t.txt") as f:
        f.write("é\n")
    with atomic_write(tmp_path / "b.bin", "wb") as f:
        f.write(b"\x00\x01")
    with atomic_write(tmp_path / "z.json.gz", "wb", gzip=True) as f:
        f.write(b"[1]")
    with atomic_write(tmp_path / "zt.gz", "w", gzip=True) as f:
        f.write("text")
    assert (tmp_path / "t.txt").read_bytes() == "é\n".encode()
    assert (tmp_path / "b.bin").read_bytes() == b"\x00\x01"
    assert gzip.decompress((tmp_path / "z.json.gz").read_bytes()) == b"[1]"
    assert gzip.decompress((tmp_path / "zt.gz").read_bytes()) == b"text"
    assert sorted(os.listdir(tmp_path)) == ["b.bin", "t.txt", "z.json.gz", "zt.gz"]


def test_a_new_file_gets_the_mode_open_would_give_it(tmp_path):
    old = os.umask(0o027)
    try:
        with atomic_write(tmp_path / "m.txt") as f:
            f.write("x")
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(tmp_path / "m.txt").st_mode) == 0o640


def test_an_exception_leaves_the_old_file_and_no_temporary_file(tmp_path):
    path = tmp_path / "keep.txt"
    path.write_text("old")
    with pytest.raises(RuntimeError, match="half way"):
        with atomic_write(path) as f:
            f.write("new " * 100_000)
            raise RuntimeError("half way")
    assert path.read_text() == "old" and os.listdir(tmp_path) == ["keep.txt"]


def test_a_serializer_that_raises_half_way_keeps_the_saved_result(tmp_path, monkeypatch):
    good = good_result()
    path = tmp_path / "r.json"
    good.save(path)
    before = path.read_bytes()
    big = good_result("big")
    big.samples = np.arange(1.0, 200_001.0)
    data = big.to_dict()
    data["zz_unserializable"] = object()  # json reaches it after writing the samples
    monkeypatch.setattr(type(big), "to_dict", lambda self, samples=True: data)
    with pytest.raises(TypeError, match="not JSON serializable"):
        big.save(path)
    assert path.read_bytes() == before and os.listdir(tmp_path) == ["r.json"]
    assert gp.BenchmarkResult.load(path) == good


KILLED_WRITER = """
import sys, numpy as np, gpuprofile as gp
r = gp.BenchmarkResult.load(sys.argv[1])
r.samples = np.random.default_rng(0).random(3_000_000)
print("writing", flush=True)
r.save(sys.argv[1])
print("done", flush=True)
"""


def test_a_writer_killed_during_save_leaves_the_good_file(tmp_path):
    """SIGKILL while a large result is being written over a good baseline: the baseline loads as
    it was (only the temporary file, named so, is left behind: nothing runs after SIGKILL)."""
    path = tmp_path / "base.json"
    good = good_result()
    good.save(path)
    child = subprocess.Popen([sys.executable, "-c", KILLED_WRITER, str(path)], stdout=subprocess.PIPE,
                             text=True)
    try:
        assert child.stdout.readline() == "writing\n"
        deadline = time.monotonic() + 60
        temps = []
        while time.monotonic() < deadline and child.poll() is None:
            temps = [p for p in tmp_path.iterdir() if p.name != "base.json"]
            if temps and temps[0].stat().st_size > 1 << 20:  # well into the samples
                break
            time.sleep(0.005)
        assert child.poll() is None, "the writer finished before it could be killed"
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.kill()
        child.wait()
        child.stdout.close()
    assert child.returncode == -signal.SIGKILL
    assert gp.BenchmarkResult.load(path) == good
    assert [p.name for p in temps] == [p.name for p in tmp_path.iterdir() if p.name != "base.json"]
    assert temps[0].name.startswith(".base.json.") and temps[0].name.endswith(".tmp")


def test_a_symbolic_link_is_followed(tmp_path):
    (tmp_path / "target.json").write_text("old")
    (tmp_path / "link.json").symlink_to("target.json")
    write_json(tmp_path / "link.json", [1])
    assert (tmp_path / "link.json").is_symlink() and json.loads((tmp_path / "target.json").read_text()) == [1]


@pytest.mark.parametrize("where", ["folder", "missing/x.json", "file.txt/x.json"])
def test_errors_name_the_destination_and_leave_nothing(tmp_path, where):
    (tmp_path / "file.txt").write_text("")
    path = tmp_path if where == "folder" else tmp_path / where
    with pytest.raises(OSError) as info:
        write_json(path, {"a": 1})
    assert info.value.filename == str(path)
    with pytest.raises(OSError) as info:
        check_writable(path)
    assert info.value.filename == str(path)
    assert os.listdir(tmp_path) == ["file.txt"]


def test_check_writable_touches_nothing(tmp_path):
    check_writable(tmp_path / "new.json")
    (tmp_path / "old.json").write_text("kept")
    check_writable(tmp_path / "old.json")
    assert os.listdir(tmp_path) == ["old.json"] and (tmp_path / "old.json").read_text() == "kept"


def test_json_is_strict_both_ways(tmp_path):
    data = {"a": math.nan, "b": [1.5, math.inf, (-math.inf, 2)], "c": {"d": np.float64("nan")}, "e": "NaN"}
    assert finite_or_none(data) == {"a": None, "b": [1.5, None, [None, 2]], "c": {"d": None}, "e": "NaN"}
    write_json(tmp_path / "s.json", data)
    text = (tmp_path / "s.json").read_text()
    assert "NaN" not in text.replace('"NaN"', "") and "Infinity" not in text
    assert read_json(tmp_path / "s.json")["b"] == [1.5, None, [None, 2]]
    for token in ("NaN", "Infinity", "-Infinity"):
        with pytest.raises(ValueError, match=f"{token} is not valid JSON"):
            loads_json(f'{{"x": [1, {token}]}}')


class _IntKind(int):
    pass


@pytest.mark.parametrize("indent", [1, 2, 0, "\t", None])
def test_written_json_is_json_dumps_text_byte_for_byte(indent, monkeypatch):
    """dumps_json (write_json's text) hands each container of plain values to json's C encoder:
    the text is json.dumps(finite_or_none(data), indent=...) exactly, whatever the nesting, and
    json's pure-Python encoder never runs (it took 12 s for a 400k-row comparison)."""
    import json.encoder

    rows = [{"name": f"t{i}", "ratio": [1.5, math.nan, math.inf][i % 3], "rounds": i, "ok": i % 2 == 0,
             "why": None if i else "é \u2028 \"q\"\n"} for i in range(5)]
    cases = [
        {}, [], (), 0, "x", None, math.nan, -0.0, 10**30, [math.inf, -math.inf], {"a": [], "b": {}},
        {"rows": rows, "missing": [{"name": "a", "file": "b"}], "files": ["a", "b"]},
        {1: 2, None: 3, 2.5: [1], False: "f"}, {"nested": {1: "int key inside"}}, [[[]], [{}], [[1]]],
        {"np": np.float64(1.25), "e": _IntKind(7), "t": (1, (2, math.nan))}, [{"a": {"b": [{"c": 1}]}}],
        [{"why": "},\n   {", "k}": "}, {"}, {"x": 1}], [{"a": 1}, {}], [{"a": 1}, {"b": [1]}], [{"a": 1}, [1]],
        {"deep": [{"a": "}\n{"}, {"b": math.inf}]}, [{"a": 1}, {"a": _IntKind(2)}], [[{"a": 1}, {"b": 2}]],
    ]
    calls = []
    real = json.encoder._make_iterencode
    for data in cases:
        want = json.dumps(finite_or_none(data), indent=indent, allow_nan=False)
        monkeypatch.setattr(json.encoder, "_make_iterencode", lambda *a, **k: calls.append(1) or real(*a, **k))
        assert dumps_json(data, indent=indent) == want, data
        monkeypatch.setattr(json.encoder, "_make_iterencode", real)
    # {"nested": {1: ...}}: a key json spells, not the walk; from 3.13 json's C encoder indents
    assert len(calls) == (indent is not None and sys.version_info < (3, 13))
    with pytest.raises(TypeError, match="not JSON serializable"):
        dumps_json({"a": [{"b": object()}]})


def test_deeply_nested_json_is_a_value_error():
    with pytest.raises(ValueError, match="nested too deeply"):
        loads_json("[" * 200_000 + "]" * 200_000)


def test_saved_results_round_trip_non_finite_numbers_as_nan(tmp_path):
    r = good_result()
    r.ci_low_ms = r.ci_high_ms = math.nan
    r.rel_noise = math.inf
    r.save(tmp_path / "r.json")
    text = (tmp_path / "r.json").read_text()
    assert '"ci_low_ms": null' in text and '"rel_noise": null' in text
    back = gp.BenchmarkResult.load(tmp_path / "r.json")
    assert math.isnan(back.ci_low_ms) and math.isnan(back.rel_noise) and back.median_ms == r.median_ms


def test_figures_are_saved_atomically_in_the_named_format(tmp_path):
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig = plt.figure()
    save_figure(fig, tmp_path / "f.png")
    save_figure(fig, tmp_path / "f.svg")
    plt.close(fig)
    assert (tmp_path / "f.png").read_bytes()[:4] == b"\x89PNG"
    assert b"<svg" in (tmp_path / "f.svg").read_bytes()[:500]
    assert sorted(os.listdir(tmp_path)) == ["f.png", "f.svg"]


WRITE_OPEN = re.compile(r"""\bopen\([^\n]*["'][wax]b?t?["']|\.savefig\(|\.write_(text|bytes)\(""")


def test_no_writer_in_the_package_opens_its_destination_directly():
    """Every file the package writes goes through gpuprofile._files (a grep of the sources)."""
    root = os.path.dirname(gp.__file__)
    offenders = []
    for folder, _, names in os.walk(root):
        for name in names:
            if name.endswith(".py") and name != "_files.py":
                with open(os.path.join(folder, name), encoding="utf-8") as f:
                    offenders += [f"{name}: {line.strip()}" for line in f
                                  if WRITE_OPEN.search(line) and "atomic_write(" not in line]
    assert offenders == []


def test_trace_merge_and_collapsed_stack_writers_use_the_helper(tmp_path):
    """merge_traces writes through atomic_write: a failure half way keeps the old output."""
    from gpuprofile.tracing import merge

    out = tmp_path / "merged.json"
    out.write_text("old")

    class Boom:
        def __iter__(self):
            raise RuntimeError("events failed")

    with pytest.raises(RuntimeError):
        merge._write(str(out), Boom())
    assert out.read_text() == "old" and os.listdir(tmp_path) == ["merged.json"]
    merge._write(str(out), [{"ph": "X"}])
    assert json.loads(out.read_text()) == {"displayTimeUnit": "ns", "traceEvents": [{"ph": "X"}]}


def test_other_readers_turn_deep_nesting_into_clear_errors(tmp_path, monkeypatch):
    from gpuprofile.counters import roofline
    from gpuprofile.tracing.merge import read_trace

    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(ValueError, match="deep.json"):
        read_trace(deep)
    monkeypatch.setattr(roofline, "cache_path", lambda: str(deep))
    assert roofline._read_file() == {}
    deep.write_text("[1, 2]")  # valid JSON, not a cache
    assert roofline._read_file() == {}


# ---- what is not a regular file is written in place; a regular file keeps its mode and owner ----

def test_a_fifo_is_written_in_place_not_replaced(tmp_path):
    import threading

    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    write_json(fifo, {"a": 1})
    reader.join(timeout=30)
    assert not reader.is_alive() and json.loads(got[0]) == {"a": 1}
    assert stat.S_ISFIFO(os.stat(fifo).st_mode) and os.listdir(tmp_path) == ["out.fifo"]
    check_writable(fifo)  # does not open it (that would wait for a reader)
    assert os.listdir(tmp_path) == ["out.fifo"]


def test_a_character_device_is_written_in_place(tmp_path):
    before = os.stat("/dev/null")
    write_json("/dev/null", {"a": 1})
    with atomic_write("/dev/null", "wb", gzip=True) as f:
        f.write(b"x" * 1000)
    check_writable("/dev/null")
    after = os.stat("/dev/null")
    assert stat.S_ISCHR(after.st_mode) and (after.st_ino, after.st_rdev) == (before.st_ino, before.st_rdev)
    node = tmp_path / "null"  # the same device made in tmp_path, where the process may
    try:
        os.mknod(node, stat.S_IFCHR | 0o666, before.st_rdev)
    except (PermissionError, AttributeError):
        return
    write_json(node, [1, 2])
    assert stat.S_ISCHR(os.stat(node).st_mode) and os.listdir(tmp_path) == ["null"]


WRITE_TO_STDOUT = """
import sys
from gpuprofile._files import write_json
print("printed first", flush=False)
write_json(sys.argv[1], [1])
print("printed after")
"""


@pytest.mark.parametrize("into", ["pipe", "file"])
@pytest.mark.parametrize("name", ["/dev/stdout", "/dev/fd/1", "/proc/self/fd/1"])
def test_stdout_is_written_through_its_descriptor(tmp_path, into, name):
    """`--json /dev/stdout` into a pipe works, and into a file (`> out`) it follows what was
    printed instead of replacing or truncating the file."""
    if into == "pipe":
        out = subprocess.run([sys.executable, "-c", WRITE_TO_STDOUT, name], capture_output=True,
                             text=True, check=True).stdout
    else:
        with open(tmp_path / "out.txt", "w") as f:
            subprocess.run([sys.executable, "-c", WRITE_TO_STDOUT, name], stdout=f, check=True)
        out = (tmp_path / "out.txt").read_text()
        assert os.listdir(tmp_path) == ["out.txt"]
    assert out == "printed first\n[\n 1\n]printed after\n"


def test_a_replaced_file_keeps_its_mode_and_owner(tmp_path):
    path = tmp_path / "private.json"
    path.write_text("old")
    os.chmod(path, 0o600)
    write_json(path, [1])
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    os.chmod(path, 0o664)
    with atomic_write(path, "w", gzip=True) as f:
        f.write("x")
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o664
    if os.geteuid() != 0:
        return
    os.chown(path, 12345, 23456)  # root can give a file away: the new one goes to the same owner
    write_json(path, [2])
    st = os.stat(path)
    assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (12345, 23456, 0o664)


def test_a_read_only_file_is_refused_unless_asked(tmp_path):
    """A baseline made read-only (0444) is kept, even for root, with an error naming it; the
    writer can say replace_read_only=True."""
    path = tmp_path / "baseline.json"
    path.write_text("kept")
    os.chmod(path, 0o444)
    for attempt in (lambda: write_json(path, [1]), lambda: check_writable(path)):
        with pytest.raises(PermissionError, match="read-only file \\(mode 0444\\)") as info:
            attempt()
        assert info.value.filename == str(path)
    assert path.read_text() == "kept" and os.listdir(tmp_path) == ["baseline.json"]
    with atomic_write(path, "w", replace_read_only=True) as f:
        f.write("new")
    assert path.read_text() == "new" and stat.S_IMODE(os.stat(path).st_mode) == 0o444


def test_a_ctrl_c_half_way_removes_the_temporary_file(tmp_path):
    path = tmp_path / "r.json"
    path.write_text("old")
    with pytest.raises(KeyboardInterrupt):
        with atomic_write(path) as f:
            f.write("x" * 100_000)
            raise KeyboardInterrupt
    assert os.listdir(tmp_path) == ["r.json"] and path.read_text() == "old"


def test_temporary_files_of_killed_writers_are_removed_by_the_next_write(tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True)
    pid = int(dead.stdout)  # a process that has exited
    names = [f".r.json.gpuprofile-{pid}-0badf00d.tmp",  # a killed writer's: removed
             f".r.json.gpuprofile-{os.getppid()}-0badf00d.tmp",  # a live process's: kept
             f".other.json.gpuprofile-{pid}-0badf00d.tmp",  # another file's: kept for its writer
             "r.json.gpuprofile-1-x.tmp"]  # not ours
    for name in names:
        (tmp_path / name).write_text("partial")
    write_json(tmp_path / "r.json", [1])
    assert sorted(os.listdir(tmp_path)) == sorted(["r.json", *names[1:]])
    with atomic_write(tmp_path / "r.json") as f:  # the name is recognisable while it is written
        (tmp,) = [n for n in os.listdir(tmp_path) if n.startswith(".r.json.gpuprofile-")
                  and n not in names]
        assert re.fullmatch(rf"\.r\.json\.gpuprofile-{os.getpid()}-[0-9a-f]{{8}}\.tmp", tmp)
        f.write("x")
