"""No state of the process yields a wrong CUPTI number (issue 30), as a stateful property test on
the device: random sequences of torch.profiler runs (CUDA-only and CPU+CUDA), gpuprofile calls
refused while it records, gpuprofile.profile (with and without Python lines), memory.track,
metrics, stalls, regions and benchmark in each mode. After every benchmark its median is checked
against an independent truth (a spin kernel's CUPTI duration measured in a fresh process), within
max(1 %, 0.3 µs); after every profile and metrics call the kernel count is checked exactly; after
every step nothing of CUPTI may still be held. Where CUPTI cannot be used (torch.profiler
recording), the result must say so: clock 'gpu' and a note, never a silent change of meaning."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

hypothesis = pytest.importorskip("hypothesis")
torch = pytest.importorskip("torch")

from hypothesis import Phase, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule  # noqa: E402

import gpuprofile as gp  # noqa: E402
from gpuprofile import _C, kernels  # noqa: E402

# In a fresh interpreter: the states are this test's own, not what earlier tests left.
pytestmark = [pytest.mark.gpu, pytest.mark.fresh_interpreter]
if gp.device_count() == 0 or not torch.cuda.is_available():  # pragma: no cover
    pytest.skip("needs a CUDA device visible to torch", allow_module_level=True)

SPIN_NS = 50_000
WORK_KERNELS = 7
TRUTH_SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "cupti_truth.py"
CUDA = [torch.profiler.ProfilerActivity.CUDA]
CPU_CUDA = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]


def _truth_us() -> float:
    """The spin kernel's CUPTI duration (median), read by torch.profiler in a fresh process."""
    cmd = [sys.executable, str(TRUTH_SCRIPT), "--spin-ns", str(SPIN_NS), "--read-mib", "0",
           "--gemm", "", "--reps", "200"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout)[f"spin_{SPIN_NS}ns"]["cold"]["median_us"]


TRUTH_US = None
HISTORY: list = []  # every step of every example: the process's state is what all of them left


def _work():
    for _ in range(WORK_KERNELS):
        kernels.spin(5_000)


class CuptiStates(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        global TRUTH_US
        if TRUTH_US is None:
            TRUTH_US = _truth_us()
        self.stream = torch.cuda.Stream()
        self.log = HISTORY
        HISTORY.append("--- new example")

    def _tail(self) -> str:
        """The last steps of the process (the shrunk example alone does not reproduce a state)."""
        return " -> ".join(self.log[-40:])

    def _check_benchmark(self, r, what):
        tolerance = max(0.01 * TRUTH_US, 0.3)
        assert r.clock == "cupti" and r.clock_note is None, (what, repr(r), self._tail())
        assert abs(r.median_us - TRUTH_US) <= tolerance, (
            f"{what}: median {r.median_us:.3f} us vs truth {TRUTH_US:.3f} us (±{tolerance:.3f}) "
            f"after {self._tail()}")

    @rule(activities=st.sampled_from(["cuda", "cpu+cuda"]))
    def torch_profiler(self, activities):
        self.log.append(f"torch.profiler({activities})")
        with torch.profiler.profile(activities=CUDA if activities == "cuda" else CPU_CUDA) as tp:
            _work()
            torch.cuda.synchronize()
        seen = sum(e.device_type.name == "CUDA" for e in tp.events())
        assert seen >= WORK_KERNELS, f"torch.profiler saw {seen} kernels after {self._tail()}"

    @rule()
    def refused_while_torch_records(self):
        self.log.append("refused inside torch.profiler")
        with torch.profiler.profile(activities=CUDA):
            with pytest.raises(gp.CuptiError, match="torch.profiler"):
                gp.profile().start()
            r = gp.benchmark(kernels.spin, SPIN_NS, max_time=0.3)
            assert r.clock == "gpu" and "CUPTI" in r.clock_note, repr(r)
            torch.cuda.synchronize()

    @rule(stacks=st.sampled_from([False, "line"]))
    def profile(self, stacks):
        self.log.append(f"profile(python_stacks={stacks})")
        with gp.profile(memory=False, python_stacks=stacks) as p:
            _work()
        assert len(p.kernels) == WORK_KERNELS, (len(p.kernels), self._tail())

    @rule()
    def memory_track(self):
        self.log.append("memory.track")
        torch.cuda.empty_cache()
        with gp.memory.track() as m:
            x = torch.empty(32 << 20, dtype=torch.uint8, device="cuda")
            torch.cuda.synchronize()
        del x
        assert m.peak_bytes >= 32 << 20, m

    @rule()
    def metrics(self):
        self.log.append("metrics")
        m = gp.metrics(_work, metrics=["gpu__time_duration.sum"])
        assert len(m.kernels) == WORK_KERNELS, (m, self._tail())

    @rule()
    def stalls(self):
        self.log.append("stalls")
        try:
            assert gp.stalls(lambda: kernels.spin(200_000)).kernels
        except gp.GpuProfileError as e:  # documented: counters collected on the spin kernel
            assert "non-user kernels" in str(e), e  # earlier (metrics) hide it from PC sampling


    @rule()
    def region(self):
        self.log.append("region")
        with gp.region("state-machine"):
            _work()
        assert gp.stats("state-machine").count >= 1

    @rule(mode=st.sampled_from(["cold", "hot", "graph"]))
    def benchmark(self, mode):
        self.log.append(f"benchmark({mode})")
        if mode == "graph":
            with torch.cuda.stream(self.stream):
                r = gp.benchmark(lambda: kernels.spin(SPIN_NS, stream=self.stream), mode="graph",
                                 stream=self.stream, max_time=0.5)
        else:
            r = gp.benchmark(kernels.spin, SPIN_NS, mode=mode, max_time=0.5)
        self._check_benchmark(r, f"benchmark({mode})")

    @invariant()
    def nothing_of_cupti_held(self):
        refs = _C._activity_state()["refs"]
        assert not any(refs.values()), (refs, self._tail())
        # at most one claim: stalls() (here or in an earlier test) keeps capturing cubins for the
        # rest of the process, so PC samples map to source lines
        assert _C._subscriber_state()["users"] <= 1, (_C._subscriber_state(), self._tail())


# No shrinking: each example runs in the state all earlier ones left, so a shrunk example would
# not reproduce; the failure message names the process's last steps instead.
EXAMPLES = int(os.environ.get("GPUPROFILE_STATES_EXAMPLES", "6"))  # longer runs: more examples
CuptiStates.TestCase.settings = settings(max_examples=EXAMPLES, stateful_step_count=10, deadline=None,
                                         derandomize=False, database=None,
                                         phases=[Phase.generate])
test_cupti_states = CuptiStates.TestCase
