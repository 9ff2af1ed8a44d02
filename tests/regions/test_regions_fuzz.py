"""Fuzzing regions, their stream argument and NVTX (marker `fuzz`): junk arguments raise clear
errors, and random sequences of enter/exit/disable/reset keep the records exactly as a model of
the per-thread stack says."""

import numpy as np
import pytest
from fuzzing import Raises, clear_errors_only, ints, junk, scalars
from hypothesis import given
from hypothesis import strategies as st

import gpuprofile as gp
from gpuprofile import nvtx

pytestmark = pytest.mark.fuzz


def _stream_objects():
    """Objects offering a stream through __cuda_stream__ or .cuda_stream, with junk inside."""

    def protocol(value):
        class Proto:
            def __cuda_stream__(self):
                if isinstance(value, Raises):
                    raise RuntimeError("producer refuses")
                return value

        return Proto()

    def attribute(value):
        class Attr:
            cuda_stream = value

        return Attr()

    def not_callable(value):
        class NotCallable:
            __cuda_stream__ = value

        return NotCallable()

    values = st.one_of(junk(), st.tuples(scalars(), scalars()), st.tuples(ints(), ints()))
    return st.one_of(values.map(protocol), values.map(attribute), values.map(not_callable),
                     scalars())


def _may_use_stream(stream) -> bool:
    """Only without a device may a junk handle reach enter (with one it is a real pointer)."""
    return stream is None or gp.device_count() == 0


@given(name=st.one_of(st.text(max_size=12), scalars()), stream=_stream_objects(),
       nvtx_flag=scalars(), memory=scalars(), raise_in_body=st.booleans())
def test_region_arguments(name, stream, nvtx_flag, memory, raise_in_body):
    with clear_errors_only(RuntimeError):
        r = gp.region(name, stream, nvtx_flag, memory=memory)
        assert isinstance(repr(r), str)
        if _may_use_stream(stream):
            with pytest.raises(KeyboardInterrupt) if raise_in_body else _nothing():
                with r:
                    if raise_in_body:
                        raise KeyboardInterrupt  # not an Exception: the region must not swallow it
    assert gp.records()["open"].sum() == 0
    gp.reset()


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


@given(args=st.lists(junk(), max_size=6), kwargs=st.dictionaries(
    st.sampled_from(["name", "stream", "nvtx", "memory", "metrics", "other"]), junk(), max_size=4))
def test_region_call_forms(args, kwargs):
    """Positional and keyword junk through both constructors (vectorcall and tp_new)."""
    if not _may_use_stream(kwargs.get("stream", args[1] if len(args) > 1 else None)):
        return
    for make in (gp.region, lambda *a, **k: gp.region.__new__(gp.region, *a, **k)):
        with clear_errors_only():
            make(*args, **kwargs)


@given(target=junk(), exits=st.lists(junk(), max_size=4))
def test_region_decorator_and_exit_arguments(target, exits):
    r = gp.region("deco")
    with clear_errors_only():
        wrapped = r(target)
        with clear_errors_only():
            wrapped()
    with clear_errors_only():
        r.__exit__(*exits)  # not open: a clear GpuProfileError whatever the arguments
    assert not gp.records()["open"].any()


OPS = st.lists(st.tuples(st.sampled_from(["enter", "exit", "exit_raised", "disable", "enable",
                                          "reset", "records"]), st.integers(0, 3)), max_size=40)


@given(ops=OPS, names=st.lists(st.sampled_from("abc"), min_size=4, max_size=4))
def test_random_enter_exit_sequences_match_a_model(ops, names):
    """The store against a model of one context: open frames (region, record), enters made
    while disabled (a count per region object) and records (name, parent, depth: the parent's plus one, raised). An
    exit closes the innermost open frame of its region, in any order (after an exit made while
    disabled consumes an enter made while disabled); an exit with nothing to close, and reset
    while regions are open, raise GpuProfileError and change nothing."""
    gp.enable()
    gp.reset()  # one test function runs many examples
    regions = [gp.region(n, nvtx=False) for n in names]
    frames, model, disabled = [], [], {}
    enabled = True
    for op, i in ops:
        r = regions[i]
        if op == "enter":
            if enabled:
                parent = frames[-1][1] if frames else -1
                model.append([names[i], parent, model[parent][2] + 1 if frames else 0, False])
                frames.append((r, len(model) - 1))
            else:
                disabled[id(r)] = disabled.get(id(r), 0) + 1
            r.__enter__()
        elif op in ("exit", "exit_raised"):
            raised = op == "exit_raised"
            mine = [k for k, f in enumerate(frames) if f[0] is r]
            args = (ValueError, ValueError(), None) if raised else (None, None, None)
            if disabled.get(id(r), 0) and (not enabled or not mine):
                disabled[id(r)] -= 1
                r.__exit__(*args)
            elif mine:
                model[frames.pop(mine[-1])[1]][3] = raised
                r.__exit__(*args)
            else:
                with pytest.raises(gp.GpuProfileError, match="not open in this thread"):
                    r.__exit__(None, None, None)
        elif op in ("disable", "enable"):
            enabled = op == "enable"
            (gp.enable if enabled else gp.disable)()
        elif op == "reset":
            if frames:
                with pytest.raises(gp.GpuProfileError, match="open"):
                    gp.reset()
            else:
                gp.reset()
                model = []
        else:
            _check(gp.records(), model, frames)
    _check(gp.records(), model, frames)
    gp.enable()
    for r, _ in reversed(frames):
        r.__exit__(None, None, None)
    for r in regions:
        while disabled.get(id(r), 0):
            disabled[id(r)] -= 1
            r.__exit__(None, None, None)
    assert not gp.records()["open"].any()


def _check(recs, model, frames):
    open_recs = {f[1] for f in frames if f[1] is not None}
    assert len(recs) == len(model)
    assert recs["name"].tolist() == [m[0] for m in model]
    assert recs["parent"].tolist() == [m[1] for m in model]
    assert recs["depth"].tolist() == [m[2] for m in model]
    assert recs["open"].tolist() == [k in open_recs for k in range(len(model))]
    closed = ~recs["open"]
    assert recs["raised"][closed].tolist() == [m[3] for k, m in enumerate(model) if k not in open_recs]
    assert np.all(np.isnan(recs["host_ms"][~closed]))


@given(message=st.one_of(st.text(max_size=16), scalars()), color=st.one_of(scalars(), st.text(max_size=10)),
       domain=st.one_of(st.none(), st.text(max_size=6), scalars()), category=scalars(),
       range_id=scalars())
def test_nvtx_arguments(message, color, domain, category, range_id):
    for call in (lambda: nvtx.push(message, color, domain, category), lambda: nvtx.pop(domain),
                 lambda: nvtx.mark(message, color, domain, category),
                 lambda: nvtx.start(message, color, domain, category),
                 lambda: nvtx.end(range_id, domain)):
        with clear_errors_only():
            call()
    with clear_errors_only():
        with nvtx.range(message, color=color, domain=domain, category=category):
            pass
    with clear_errors_only():
        nvtx.range(message, color=color)(lambda: None)()


@given(args=st.lists(junk(), max_size=5))
def test_nvtx_c_entry_points(args):
    """The C functions behind gpuprofile.nvtx take junk directly too (a domain handle is an int
    token: any int is passed to NVTX, which ignores it without a tool attached)."""
    from gpuprofile import _C

    for fn in (_C._nvtx_push, _C._nvtx_pop, _C._nvtx_mark, _C._nvtx_start, _C._nvtx_end,
               _C._nvtx_domain_create):
        if fn in (_C._nvtx_push, _C._nvtx_mark, _C._nvtx_start, _C._nvtx_pop, _C._nvtx_end) and \
                len(args) > 2 and isinstance(args[2 if fn not in (_C._nvtx_pop, _C._nvtx_end) else 1], int):
            continue  # a domain handle must come from _nvtx_domain_create: NVTX dereferences it
        with clear_errors_only(OverflowError):
            fn(*args)
