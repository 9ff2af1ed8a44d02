"""Step-scheduled profiling on a GPU: a loop of our own kernels where step i launches the probe
kernel with i + 1 blocks, so each traced kernel names the step it ran in. Checked: which steps
each cycle recorded, on_trace_ready once per cycle with that cycle's profile, warm-up steps
absent, a trace file per cycle, summary sorting."""

import json

import numpy as np
import pytest

import gpuprofile as gp

pytestmark = pytest.mark.gpu

C = gp._C
PROBE = "gp_probe_kernel(float*, int)"


def steps_in(profile):
    k = profile.kernels
    return sorted(int(g) - 1 for g in k["grid_x"][k["name"] == PROBE])


def run_loop(p, steps, sync=True):
    with p:
        for i in range(steps):
            with gp.region(f"step{i}"):
                C._testing.probe_launch(i + 1, 32)
            if sync:  # each step's kernel ends inside its step (traces keep records overlapping them)
                C._synchronize()
            p.step()


def test_each_cycle_records_its_active_steps_and_is_handed_over_once(tmp_path):
    C._testing.probe_launch(1, 32)  # first launch (module load) outside the measurement
    C._synchronize()
    ready = []

    def on_trace_ready(p):
        path = p.export_chrome_trace(tmp_path / f"cycle{p.cycles}.json")
        ready.append((p.step_num, p.cycles, steps_in(p.profile),
                      sorted(set(p.kernels["region"][p.kernels["name"] == PROBE])), path))

    p = gp.profile(schedule=gp.schedule(wait=1, warmup=1, active=2, repeat=2, skip_first=1),
                   on_trace_ready=on_trace_ready, memory=False)
    run_loop(p, 10)
    # steps: 0 skipped, 1 wait, 2 warm-up, 3-4 recorded, 5 wait, 6 warm-up, 7-8 recorded, 9 none
    assert [r[:4] for r in ready] == [(5, 1, [3, 4], ["step3", "step4"]),
                                      (9, 2, [7, 8], ["step7", "step8"])]
    for *_, path in ready:
        with open(path) as f:
            trace = json.load(f)
        names = {e.get("name") for e in trace["traceEvents"]}
        assert PROBE in names
    assert p.cycles == 2 and steps_in(p.profile) == [7, 8]


def test_without_sync_the_loop_keeps_running_and_recorded_steps_are_all_there():
    ready = []
    p = gp.profile(schedule=gp.schedule(wait=0, warmup=1, active=3),
                   on_trace_ready=lambda p: ready.append(steps_in(p.profile)), memory=False)
    run_loop(p, 8, sync=False)  # cycles: warm-up 0, 4; recorded 1-3, 5-7
    assert len(ready) == 2
    for recorded, expected in zip(ready, ([1, 2, 3], [5, 6, 7]), strict=True):
        # a warm-up kernel still running when the trace starts may overlap it; none of the
        # recorded steps may be missing
        assert set(expected) <= set(recorded) <= set(expected) | {expected[0] - 1}


def test_summary_sort_and_row_limit_on_a_real_trace():
    with gp.profile(memory=False, memcpy=False, memset=False) as p:
        for _ in range(3):
            C._testing.probe_launch(1, 32)
        gp.kernels.spin(200_000)
    top = p.summary(sort_by="calls", row_limit=1)
    assert [(r.key, r.calls) for r in top.by_kernel] == [(PROBE, 3)]
    assert p.summary().by_kernel[0].key == "gp_spin_kernel(unsigned long)"  # most GPU time
    assert np.isclose(top.busy_ms, p.summary().busy_ms)
