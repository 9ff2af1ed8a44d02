"""gpuprofile with JAX, as a JAX user runs it (issue 30): XLA launches on a stream of its own from
its own runtime, so nothing on the benchmark's or a region's stream orders it. The benchmark
must time every kernel a jitted call causes or refuse, never read 0; a profile must see and
attribute XLA's kernels, and say when a region's events missed them; the bundled attention must
take JAX arrays (DLPack). Skipped without jax or a device."""

import os

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # leave memory to the others

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import gpuprofile as gp  # noqa: E402

pytestmark = pytest.mark.gpu

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")


@pytest.fixture(scope="module", autouse=True)
def _jax_on_a_gpu():
    """JAX's CUDA backend starts here, not when the module is collected: starting it leaves the
    last GPU current on this thread (seen with two GPUs: every test collected after it then ran
    on device 1). The caller's device is current again after this module's tests."""
    if gp.device_count() == 0:  # pragma: no cover
        pytest.skip("needs a CUDA device")
    before = gp._C._current_device()
    try:
        if not any(d.platform == "gpu" for d in jax.devices()):  # pragma: no cover
            pytest.skip("needs a CUDA device visible to JAX")
        yield
    finally:
        if gp._C._current_device() != before:
            torch = pytest.importorskip("torch")  # gpuprofile sets no device; torch can
            torch.cuda.set_device(before)


@pytest.fixture(scope="module")
def matmul():
    f = jax.jit(lambda a: (a @ a).sum())
    x = jax.random.normal(jax.random.PRNGKey(0), (4096, 4096), jnp.bfloat16)
    f(x).block_until_ready()
    with gp.profile(memory=False) as p:
        for _ in range(10):
            f(x).block_until_ready()
    k = p.kernels
    truth_ms = float(k["duration_ns"].sum()) / 10 / 1e6  # kernel time per call
    return f, x, truth_ms, len(k) // 10


def test_profile_sees_every_xla_kernel(matmul):
    f, x, truth_ms, per_call = matmul
    assert per_call >= 1 and truth_ms > 0
    with gp.profile(memory=False) as p:
        f(x).block_until_ready()
    assert len(p.kernels) == per_call


def test_benchmark_times_xla_work_or_refuses(matmul):
    """Waiting inside fn: timed by CUPTI, the XLA stream named; without the wait, a number from
    CUPTI that covers the kernels or a clear refusal, never ~0."""
    f, x, truth_ms, _ = matmul
    r = gp.benchmark(lambda: f(x).block_until_ready(), max_time=1)
    assert r.clock == "cupti", repr(r)
    # first start to last end of each call: its kernels plus the gaps between them
    assert truth_ms * 0.97 <= r.median_ms <= truth_ms * 1.5, (r.median_ms, truth_ms)
    try:
        r = gp.benchmark(lambda: f(x), max_time=1)
    except ValueError as e:
        assert "stream" in str(e) or "no kernels" in str(e), e
    else:
        assert r.clock == "cupti" and r.median_ms >= truth_ms * 0.97, (repr(r), truth_ms)


def test_region_events_that_miss_xla_work_say_so(matmul):
    f, x, truth_ms, _ = matmul
    gp.reset()
    with gp.profile(memory=False, region_clock="events") as p:
        with gp.region("mm"):
            f(x)
        f(x).block_until_ready()
    spans = p.region_spans()
    row = spans[spans["name"] == "mm"]
    assert len(row) == 1 and row["other_stream_items"][0] >= 1, spans
    assert row["span_ms"][0] >= truth_ms * 0.9, (row, truth_ms)
    assert any("'mm'" in n and "other than its own" in n for n in p.summary().notes), p.summary()


def test_region_on_the_cupti_clock_covers_xla_work(matmul):
    """On the CUPTI clock (the default while tracing) a region's time is the span of all its
    work, XLA's stream included: nothing to note."""
    f, x, truth_ms, _ = matmul
    gp.reset()
    with gp.profile(memory=False) as p:
        with gp.region("mm"):
            f(x)
        f(x).block_until_ready()
    rec = gp.records()
    rec = rec[rec["name"] == "mm"][0]
    assert rec["gpu_clock"] == "cupti" and rec["gpu_ms"] >= truth_ms * 0.9, (rec, truth_ms)
    assert not any("'mm'" in n for n in p.summary().notes), p.summary()


def test_attention_takes_jax_arrays():
    q, k, v = (jax.random.normal(jax.random.PRNGKey(i), (1, 2, 128, 64), jnp.float32) for i in range(3))
    for t in (q, k, v):
        t.block_until_ready()  # produced on XLA's stream; our kernels read on the default one
    out = gp.kernels.attention(q, k, v, impl="flash").numpy()
    qn, kn, vn = (np.asarray(t, np.float64) for t in (q, k, v))
    s = qn @ kn.transpose(0, 1, 3, 2) / np.sqrt(64)
    ref = np.exp(s - s.max(-1, keepdims=True))
    ref = (ref / ref.sum(-1, keepdims=True)) @ vn
    err = np.linalg.norm(out - ref) / np.linalg.norm(ref)
    assert err < 1e-3, err
