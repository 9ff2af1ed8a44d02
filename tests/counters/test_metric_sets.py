"""The named metric sets: every name valid for GH100 (offline), pass counts, expansion."""

import pytest

import gpuprofile as gp
from gpuprofile.counters import catalog as _catalog
from gpuprofile.counters.metric_sets import (
    DURATION,
    FLOP_COUNTERS,
    SAMPLE_METRICS,
    SETS,
    STALL_REASONS,
    TENSOR_OPS,
    expand,
    sets_in,
    split,
)

CHIP = "GH100"


@pytest.mark.parametrize("name", sorted(SETS))
def test_every_set_is_valid_offline(name):
    s = SETS[name]
    infos = _catalog.validate(s.metrics, CHIP)
    assert set(infos) == set(s.metrics)
    assert s.metrics[0] == DURATION
    assert s.summary and s.how_to_read
    assert s.to_dict()["metrics"] == list(s.metrics)


def test_set_pass_counts_on_gh100():
    # Recorded so that a CUPTI upgrade that changes them is noticed (docs/counters.md quotes them).
    passes = {name: gp.metric_passes(name, chip=CHIP) for name in SETS}
    assert passes == {"sol": 9, "roofline": 7, "occupancy": 1, "tensor": 2, "memory": 8, "stalls": 7}


def test_pm_sampling_set_is_one_pass():
    _catalog.validate(SAMPLE_METRICS, CHIP, "pm")
    assert _catalog.configure(SAMPLE_METRICS, CHIP, "pm")[1] == 1


def test_stall_reasons_have_ratios():
    names = [f"smsp__warp_issue_stalled_{r}_per_warp_active.pct" for r in STALL_REASONS]
    assert len(_catalog.validate(names, CHIP)) == 19


def test_flop_counters_are_valid():
    names = [m for group in FLOP_COUNTERS.values() for m in group] + list(TENSOR_OPS)
    assert len(_catalog.validate(names, CHIP)) == 15


def test_expand():
    assert expand("sol") == list(SETS["sol"].metrics)
    assert expand(["dram__bytes_read.sum", "sol", "dram__bytes_read.sum"])[:2] == [
        "dram__bytes_read.sum", DURATION]
    assert expand(" lts__t_bytes.sum ") == ["lts__t_bytes.sum"]
    assert len(expand(["sol", "sol"])) == len(SETS["sol"].metrics)
    assert sets_in(["sol", "x__y.sum", "tensor"]) == ["sol", "tensor"]
    with pytest.raises(TypeError, match="set name"):
        expand(3)
    with pytest.raises(TypeError, match="must be str"):
        expand(["sol", 3])
    with pytest.raises(ValueError, match="no metrics"):
        expand([])


def test_split():
    assert split("dram__bytes_read.sum") == ("dram__bytes_read", ".sum")
    assert split("sm__throughput.avg.pct_of_peak_sustained_elapsed") == (
        "sm__throughput", ".avg.pct_of_peak_sustained_elapsed")
    assert split("TriageCompute.sm__throughput.avg.pct_of_peak_sustained_elapsed") == (
        "TriageCompute.sm__throughput", ".avg.pct_of_peak_sustained_elapsed")
    assert split("dram__bytes_read") == ("dram__bytes_read", "")
    assert split("nothing") == ("nothing", "")


def test_docs_list_every_metric_of_every_set():
    import pathlib

    doc = (pathlib.Path(__file__).parents[2] / "docs" / "counters.md").read_text()
    for s in SETS.values():
        assert f"### `{s.name}`" in doc
        assert f"({gp.metric_passes(s.name, chip=CHIP)} pass" in doc, s.name
        for m in s.metrics:
            assert m in doc, (s.name, m)
    for m in SAMPLE_METRICS:
        assert m in doc
