"""Python lines on a GPU: kernels, copies and sets launched from known lines of this file (torch,
torch.nn through its own frames, Triton, CuPy, a CUDA graph, the bundled kernels) carry those
lines; autograd's engine threads carry the forward line, marked backward; stacks, by_line() and
the trace agree."""

import json
import os
import threading
from pathlib import Path

import numpy as np
import pytest
from source_lines import line_of

import gpuprofile as gp
from gpuprofile.tracing.pylines import NO_FRAME

pytestmark = pytest.mark.gpu

if gp.device_count() == 0:  # pragma: no cover
    pytest.skip("needs a CUDA device", allow_module_level=True)

HERE = os.path.abspath(__file__)


def at(marker):
    """'this file:line' of the line holding `marker` in a comment."""
    return line_of(HERE, marker)


@pytest.mark.parametrize("regions", [True, False])
def test_bundled_kernels_and_lines_of_this_file(regions):
    """The bundled kernels launch through the runtime: their records carry the runtime call's
    id, tied to the driver call's note by the launches' API records (which python_stacks
    enables itself when regions, which enable them too, are off)."""
    with gp.profile(memory=False, regions=regions, python_stacks=True) as p:
        gp.kernels.spin(10_000)  # L-spin
        for _ in range(3):
            gp.kernels.spin(5_000)  # L-loop
    assert gp._C._activity_state()["refs"]["api"] == 0
    lines = p.kernels["python_line"].tolist()
    assert lines == [at("L-spin")] + [at("L-loop")] * 3, lines
    table = p.by_line()
    assert [r["line"] for r in table.rows][:2] == [at("L-loop"), at("L-spin")] or \
        [r["line"] for r in table.rows][:2] == [at("L-spin"), at("L-loop")]
    assert table.rows[0]["source"].startswith("gp.kernels.spin(")


def test_torch_ops_modules_copies_and_sets():
    torch = pytest.importorskip("torch")
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU()).cuda()
    x = torch.randn(32, 64, device="cuda")
    model(x)
    torch.cuda.synchronize()
    with gp.profile(memory=False, python_stacks=True) as p:
        x.mul_(2)  # T-op
        y = model(x)  # T-model
        z = torch.zeros(1 << 20, device="cuda")  # T-set
        host = y.cpu()  # T-copy
    k = p.kernels
    assert at("T-op") in set(k["python_line"]), k[["name", "python_line"]]
    from_model = k[k["python_line"] == at("T-model")]
    assert len(from_model) >= 2, k[["name", "python_line"]]  # the GEMM and the ReLU
    assert (k["python_line"] != "").all()
    copies = p.memcpy[p.memcpy["kind"] == "DtoH"]
    assert len(copies) >= 1 and set(copies["python_line"]) == {at("T-copy")}, p.memcpy
    sets_or_fills = list(p.memset["python_line"]) + list(k["python_line"])
    assert at("T-set") in sets_or_fills
    del z, host


def test_autograd_threads_launch_on_the_forward_line():
    """Autograd's engine thread has no Python frame: its kernels take the line of the forward op
    whose node they run (the one line of this file the forward went through), marked backward;
    the loss's gradient seed is launched from the backward() line itself."""
    torch = pytest.importorskip("torch")
    model = torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.ReLU(),
                                torch.nn.Linear(256, 1)).cuda()
    x = torch.randn(64, 256, device="cuda")
    model(x).sum().backward()
    torch.cuda.synchronize()
    with gp.profile(memory=False, python_stacks="line") as p:
        with gp.region("forward"):
            loss = model(x).sum()  # A-forward
        with gp.region("backward"):
            loss.backward()  # A-backward
    assert p.python_lines.autograd is None
    k = p.kernels
    fwd = k[k["region"] == "forward"]
    bwd = k[k["region"] == "backward"]
    assert len(fwd) > 0 and set(fwd["python_line"]) == {at("A-forward")}
    marked = bwd["python_line"] == at("A-forward") + " (backward)"
    assert len(bwd) > 3 and marked.mean() > 0.5, bwd[["name", "python_line"]]
    assert set(bwd["python_line"][~marked]) <= {at("A-backward"), NO_FRAME + " (backward)"}
    rows = {(r["line"], r["backward"]): r for r in p.by_line().rows}
    assert rows[(at("A-forward"), True)]["kernels"] == int(marked.sum())
    assert rows[(at("A-forward"), False)]["kernels"] == len(fwd)


def test_triton_cupy_and_graph_replay():
    torch = pytest.importorskip("torch")
    triton = pytest.importorskip("triton")
    cp = pytest.importorskip("cupy")
    import triton.language as tl

    @triton.jit
    def bump(x_ptr, n, BLOCK: tl.constexpr):
        i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(x_ptr + i, tl.load(x_ptr + i, mask=i < n) + 1, mask=i < n)

    y = torch.zeros(1 << 16, device="cuda")
    bump[(64,)](y, y.numel(), BLOCK=1024)
    c = cp.arange(1 << 16, dtype=cp.float32)
    cp.multiply(c, 2, out=c)
    a = torch.randn(256, 256, device="cuda")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        (a @ a).relu_()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        b = (a @ a).relu_()
    torch.cuda.synchronize()
    with gp.profile(memory=False, python_stacks=True) as p:
        bump[(64,)](y, y.numel(), BLOCK=1024)  # X-triton
        cp.multiply(c, 2, out=c)  # X-cupy
        g.replay()  # X-graph
        torch.cuda.synchronize()
    k = p.kernels
    by_line = {line: int((k["python_line"] == line).sum()) for line in set(k["python_line"])}
    assert by_line.get(at("X-triton")) == 1 and by_line.get(at("X-cupy")) == 1, by_line
    assert by_line.get(at("X-graph"), 0) >= 2, by_line
    del b


def test_stacks_collapsed_export_and_trace(tmp_path):
    def inner():
        gp.kernels.spin(5_000)  # S-inner

    def outer():
        inner()  # S-outer

    with gp.profile(memory=False, python_stacks="stack") as p:
        outer()  # S-call
    k = p.kernels
    assert k["python_line"].tolist() == [at("S-inner")]
    frames = p.python_lines.frames(int(k["python_stack"][0]))
    assert [f.rsplit("(", 1)[1].rstrip(")") for f in frames[-3:]] == [
        at("S-call"), at("S-outer"), at("S-inner")]
    text = Path(p.export_collapsed_stacks(tmp_path / "s.txt")).read_text().strip()
    assert text.endswith(" " + str(int(k["duration_ns"][0])))
    assert f"inner ({at('S-inner')});" in text
    trace = json.loads(Path(p.export_chrome_trace(tmp_path / "t.json")).read_text())
    spin = [e for e in trace["traceEvents"] if e.get("cat") == "kernel"]
    assert spin and spin[0]["args"]["python"] == at("S-inner")


def test_off_by_default_and_other_threads():
    with gp.profile(memory=False) as p:
        gp.kernels.spin(1_000)
    assert p.kernels["python_line"].tolist() == [""]
    with pytest.raises(gp.GpuProfileError, match="python_stacks"):
        p.by_line()

    def worker():
        gp.kernels.spin(1_000)  # W-thread

    with gp.profile(memory=False, python_stacks=True) as p:
        t = threading.Thread(target=worker)
        t.start()
        t.join()
    assert p.kernels["python_line"].tolist() == [at("W-thread")]
    # a second profile right after, and the launch log of metrics() sharing the callbacks
    with gp.profile(memory=False, python_stacks=True) as p2:
        gp.kernels.spin(1_000)  # W-again
    assert p2.kernels["python_line"].tolist() == [at("W-again")]
    m = gp.metrics(lambda: gp.kernels.spin(1_000), metrics=["gpu__time_duration.sum"])
    assert len(m.kernels) == 1
    assert np.isfinite(m.kernels[0].values["gpu__time_duration.sum"])
