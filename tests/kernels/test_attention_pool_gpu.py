"""Attention results from the stream-ordered pool (marker `gpu`): a result freed while a read of
it is still queued on another stream, or while another framework's queued work reads it, keeps
its memory until that read is done, even when new results are allocated at once."""

import numpy as np
import pytest

from gpuprofile import _C, kernels
from gpuprofile.kernels import reference as ref

pytestmark = pytest.mark.gpu
SHAPE = (1, 2, 256, 64)
HOLD_NS = 30_000_000  # a 30 ms spin keeps the reading stream behind the allocations


@pytest.fixture
def streams():
    made = [_C._stream_create() for _ in range(2)]
    yield made
    for s in made:
        _C._stream_destroy(s)


def _inputs():
    rng = np.random.default_rng(10)
    return [rng.standard_normal(SHAPE, dtype=np.float32) for _ in range(3)]


def _check(got, q, k, v):
    want = ref.reference(q, k, v)
    err, tol = ref.max_error(got, want), ref.tolerance(q, k, v, "float32", False, None, ref=want)
    assert err <= tol, f"max error {err:.3g} > tolerance {tol:.3g}: memory reused too early?"


def test_result_read_on_another_stream_outlives_its_object(streams):
    s1, s2 = streams
    q, k, v = _inputs()
    dq, dk, dv = (kernels.to_device(x) for x in (q, k, v))
    first = kernels.attention(dq, dk, dv, impl="flash").numpy()  # what o1 holds

    o1 = kernels.attention(dq, dk, dv, impl="flash", stream=s1)
    kernels.spin(HOLD_NS, stream=s2)
    o2 = kernels.attention(o1, dk, dv, impl="flash", stream=s2)  # reads o1 after the spin
    del o1  # its memory may go back only after that read
    junk = [kernels.attention(dk, dv, dq, impl="flash", stream=s1) for _ in range(8)]
    _check(o2.numpy(), first, k, v)
    del junk


def test_result_handed_to_torch_outlives_its_object():
    torch = pytest.importorskip("torch")
    q, k, v = _inputs()
    dq, dk, dv = (kernels.to_device(x) for x in (q, k, v))
    first = kernels.attention(dq, dk, dv, impl="flash").numpy()

    o = kernels.attention(dq, dk, dv, impl="flash")
    t = torch.from_dlpack(o)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        torch.cuda._sleep(50_000_000)  # cycles: tens of ms
        doubled = t * 2
    del t, o  # the free waits for the device: torch's queued read is done first
    junk = [kernels.attention(dk, dv, dq, impl="flash") for _ in range(8)]
    side.synchronize()
    np.testing.assert_array_equal(doubled.cpu().numpy() / 2, first)
    del junk


def test_pooled_results_are_independent():
    """Results dropped and re-allocated in a loop never alias a live one."""
    q, k, v = _inputs()
    dq, dk, dv = (kernels.to_device(x) for x in (q, k, v))
    keep = [kernels.attention(dq, dk, dv, impl="flash") for _ in range(4)]
    for _ in range(16):
        kernels.attention(dk, dq, dv, impl="flash")  # allocated and dropped at once
    first = keep[0].numpy()
    for o in keep[1:]:
        np.testing.assert_array_equal(o.numpy(), first)
