"""gpuprofile/counters/ncu.py on a fixed sample: the ncu command line for each cache_control, the
CSV parser (ncu's details page as `--csv` prints it, with the program's output and ==PROF==
lines around it, scaled and base units, thousands separators) and the comparison rows."""

import math

import pytest

from gpuprofile.counters.metric_sets import DRAM_READ, DURATION, SM_SOL
from gpuprofile.counters.ncu import (
    AGREEMENT_METRICS,
    REPLAY,
    compare,
    find_ncu,
    ncu_command,
    parse_ncu_csv,
    relative_difference,
)
from gpuprofile.counters.result import CACHE_CONTROL

HEADER = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream",'
          '"Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit",'
          '"Metric Value"')


def row(kid, name, metric, unit, value):
    return (f'"{kid}","4242","python3.12","127.0.0.1","{name}","1","7","(384, 1, 1)",'
            f'"(132, 1, 1)","0","9.0","Command line profiler metrics","{metric}","{unit}","{value}"')


GEMM = "nvjet_tst_128x256_64x4_1x2_h_bz_coopA_NNT"
ADD = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul>>(int, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul>)"
SAMPLE = "\n".join([
    "==PROF== Connected to process 4242 (/usr/bin/python3.12)",
    "warm-up done",
    "==PROF== Profiling \"nvjet_tst_128x256_64x4_1x2_h_bz_coopA_NNT\": 0%....50%....100% - 9 passes",
    HEADER,
    row(0, GEMM, "dram__bytes_read.sum", "byte", "85,425,792"),
    row(0, GEMM, "gpu__time_duration.sum", "nsecond", "175,488"),
    row(0, GEMM, "sm__throughput.avg.pct_of_peak_sustained_elapsed", "%", "90.33"),
    row(0, GEMM, "sm__cycles_elapsed.avg.per_second", "hz", "1,755,123,456.78"),
    row(1, ADD, "dram__bytes_read.sum", "Mbyte", "33.55"),
    row(1, ADD, "gpu__time_duration.sum", "usecond", "12.26"),
    row(1, ADD, "sm__throughput.avg.pct_of_peak_sustained_elapsed", "%", "12.5"),
    row(1, ADD, "sm__cycles_elapsed.avg.per_second", "cycle/nsecond", "1.76"),
    row(1, ADD, "lts__t_bytes.sum", "Gbyte", "n/a"),
    "==PROF== Disconnected from process 4242",
])


def test_the_command_states_the_cache_and_clock_state():
    cmd = ncu_command(["a.sum", "b.avg"], "all", ["python", "w.py", "--x"], nvtx_range="measure")
    assert cmd == ["ncu", "--clock-control", "none", "--cache-control", "all", "--replay-mode",
                   "kernel", "--metrics", "a.sum,b.avg", "--csv", "--print-units", "base",
                   "--nvtx", "--nvtx-include", "measure/", "python", "w.py", "--x"]
    cmd = ncu_command(["a.sum"], "none", ["python", "w.py"])
    assert cmd[3:7] == ["--cache-control", "none", "--replay-mode", "application"]
    assert cmd[-2:] == ["python", "w.py"] and "--nvtx" not in cmd
    with pytest.raises(ValueError, match="cache_control must be one of"):
        ncu_command(["a.sum"], "l2", ["x"])


def test_the_csv_is_parsed_to_base_units_in_profiling_order():
    kernels = parse_ncu_csv(SAMPLE)
    assert [(k["id"], k["name"]) for k in kernels] == [(0, GEMM), (1, ADD)]
    gemm, add = (k["values"] for k in kernels)
    assert gemm == {DRAM_READ: 85425792.0, DURATION: 175488.0, SM_SOL: 90.33,
                    "sm__cycles_elapsed.avg.per_second": 1755123456.78}
    assert add[DRAM_READ] == pytest.approx(33.55e6) and add[DURATION] == pytest.approx(12260.0)
    assert add["sm__cycles_elapsed.avg.per_second"] == pytest.approx(1.76e9)
    assert math.isnan(add["lts__t_bytes.sum"])
    assert kernels[1]["units"] == {DRAM_READ: "byte", DURATION: "nsecond", SM_SOL: "%",
                                   "sm__cycles_elapsed.avg.per_second": "hz",
                                   "lts__t_bytes.sum": "byte"}


def test_a_text_without_csv_or_columns_is_refused():
    with pytest.raises(ValueError, match="no ncu CSV"):
        parse_ncu_csv("==PROF== No kernels were profiled.\n")
    with pytest.raises(ValueError, match=r"without the column\(s\) \['Metric Unit'\]"):
        parse_ncu_csv('"ID","Kernel Name","Metric Name","Metric Value"\n"0","k","m","1"\n')
    assert parse_ncu_csv(HEADER + "\n") == []


def test_relative_difference():
    assert relative_difference(103.0, 100.0) == pytest.approx(0.03)
    assert relative_difference(0.0, 0.0) == 0.0 and relative_difference(1.0, 0.0) == math.inf
    assert math.isnan(relative_difference(math.nan, 1.0))
    assert math.isnan(relative_difference(1.0, math.inf))


def test_compare_rows_and_verdicts():
    theirs = parse_ncu_csv(SAMPLE)
    ours = [{"name": GEMM, "values": {DRAM_READ: 85425792.0 * 1.02, DURATION: 175000.0,
                                      SM_SOL: 90.12}},
            {"name": ADD, "values": {DRAM_READ: 33.55e6 * 0.95, DURATION: 12260.0, SM_SOL: 12.5,
                                     "lts__t_bytes.sum": 1.0}}]
    rows = compare(ours, theirs, metrics=(DURATION, SM_SOL, DRAM_READ, "lts__t_bytes.sum"),
                   time_tolerance=0.01)
    assert [(r["kernel"], r["metric"], r["ok"]) for r in rows] == [
        (0, DURATION, True), (0, SM_SOL, True), (0, DRAM_READ, True),
        (0, "lts__t_bytes.sum", False),  # absent on both sides: NaN never passes
        (1, DURATION, True), (1, SM_SOL, True), (1, DRAM_READ, False),  # -5 %
        (1, "lts__t_bytes.sum", False),  # ncu printed n/a
    ]
    assert rows[2]["rel_diff"] == pytest.approx(0.02) and rows[6]["rel_diff"] == pytest.approx(-0.05)
    assert rows[0]["name"] == GEMM and rows[0]["ncu"] == 175488.0
    with pytest.raises(ValueError, match="counted 1 kernels and ncu 2"):
        compare(ours[:1], theirs)


def test_small_percentages_agree_within_half_a_point():
    theirs = [{"values": {SM_SOL: 1.2, "dram__throughput.avg.pct_of_peak_sustained_elapsed": 40.0}}]
    ours = [{"name": "k", "values": {SM_SOL: 1.6,
                                     "dram__throughput.avg.pct_of_peak_sustained_elapsed": 41.6}}]
    rows = compare(ours, theirs, metrics=(SM_SOL, "dram__throughput.avg.pct_of_peak_sustained_elapsed"))
    assert [r["ok"] for r in rows] == [True, False]  # 0.4 points of 1.2 %; 4 % of 40 %
    ours[0]["values"][SM_SOL] = 1.8
    assert not compare(ours, theirs, metrics=(SM_SOL,))[0]["ok"]


def test_every_cache_control_has_its_ncu_replay_mode():
    assert tuple(REPLAY) == CACHE_CONTROL


def test_the_agreement_set_is_the_sol_set_and_the_byte_counters():
    assert AGREEMENT_METRICS[0] == DURATION and len(AGREEMENT_METRICS) == len(set(AGREEMENT_METRICS))
    assert {DRAM_READ, "dram__bytes_write.sum", "lts__t_bytes.sum", SM_SOL} <= set(AGREEMENT_METRICS)


def test_find_ncu_looks_on_path_then_in_cuda_home(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setenv("CUDA_HOME", str(tmp_path))
    (tmp_path / "bin").mkdir()
    ncu = tmp_path / "bin" / "ncu"
    ncu.write_text("#!/bin/sh\n")
    ncu.chmod(0o755)
    assert find_ncu() == str(ncu)
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    assert find_ncu() == str(ncu)
