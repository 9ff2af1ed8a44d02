"""What a regression gate may trust in a benchmark result, the interval it compares, and the
one rule every gate decides by (decide(): `gpuprofile compare`, the pytest plugin's compare-fail,
gp.compare, and A/B in one run, bench/ab.py).

A gate (`gpuprofile compare --fail-slower`, the pytest plugin's --gpu-benchmark-fail-slower)
fails closed: a result whose median or interval is not a finite positive number, whose samples
are not finite non-negative numbers, or whose median is not the median of its own samples (a
damaged or hand-edited file) is an error naming the field, never a pass. Works on dicts (the
plugin's saved entries) and BenchmarkResults alike; NumPy is imported only to check samples.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import asdict, dataclass

# The median saved with a result must equal its samples' median to this relative tolerance
# (both come from the same float64 samples; the slack only covers summation order).
_MEDIAN_RTOL = 1e-9

WITHIN_ONE_RUN = (
    "intervals are 95 % intervals of each median within one run: they do not cover what "
    "changes between runs (clocks, other load, the machine); for a CI gate measure each side with "
    "rounds (gpuprofile bench --rounds 5, pytest --gpu-benchmark-rounds 5), whose intervals "
    "cover the spread between rounds")


def _get(result, key):
    return result.get(key) if type(result) is dict or isinstance(result, dict) else getattr(result, key, None)


def _finite(value) -> float | None:
    """value as a finite float, or None (not a number, a bool, beyond a float's range, not finite)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        value = float(value)
    except OverflowError:  # an int too large for a float (a damaged or hostile file)
        return None
    return value if math.isfinite(value) else None


def _number_problem(key: str, value) -> str | None:
    if value is None:
        return f"{key!r} is null (a number that was not finite when saved)"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return f"{key!r} must be a number, got {type(value).__name__}"
    try:
        value = float(value)
    except OverflowError:
        return f"{key!r} is too large"
    if not math.isfinite(value):
        return f"{key!r} is {value} (not finite)"
    if value <= 0:
        return f"{key!r} is {value:g} (must be > 0)"
    return None


def problem(result) -> str | None:
    """Why `result` (a BenchmarkResult or its dict) cannot be gated on, or None when it can."""
    for key in ("median_ms", "ci_low_ms", "ci_high_ms"):
        if isinstance(result, dict) and key not in result:
            return f"{key!r} is missing"
        value = _get(result, key)
        why = _number_problem(key, value)
        if why is not None:
            if key != "median_ms" and (value is None or _is_nan(value)):
                why += "; a result needs 6 samples or more for a 95 % interval"
            return why
    median, low, high = (float(_get(result, k)) for k in ("median_ms", "ci_low_ms", "ci_high_ms"))
    if not low <= median <= high:
        return (f"'median_ms' {median:.6g} lies outside its interval 'ci_low_ms' .. 'ci_high_ms' "
                f"{low:.6g} .. {high:.6g}")
    why = _rounds_problem(result, low, high)
    if why is not None:
        return why
    samples = _get(result, "samples")
    if samples is not None and not hasattr(samples, "__len__"):
        return f"'samples' must be a list of numbers, got {type(samples).__name__}"
    if samples is None or len(samples) == 0:
        return _extremes_problem(result, low, high)
    return _samples_problem(samples, median) or _interval_problem(result, samples, low, high)


def passing(results) -> list:
    """For each of `results`, True where problem() finds nothing, decided for all of them at
    once with NumPy (a compare of 200k pairs checks 400k results: 25 us each one by one).
    Only results of the shape saved runs have are decided here: float median, interval, min,
    max and resolution (None for the last three allowed), an int of rounds, round medians a
    list of floats, no samples. False means "not shown here": problem() decides those and
    names what is wrong. The checks are problem()'s, in the same float arithmetic;
    tests/bench/test_gate.py holds the two to the same answers."""
    import numpy as np

    n = len(results)
    (median, low, high, lo, hi, step, rounds, medians, samples) = _attributes(results, (
        "median_ms", "ci_low_ms", "ci_high_ms", "min_ms", "max_ms", "resolution_ms", "rounds",
        "round_medians_ms", "samples"))

    def floats(col: list, optional: bool):
        """(which items are floats, or None where optional; the items as float64, NaN where not)"""
        kinds = set(map(type, col))
        if kinds <= ({float, type(None)} if optional else {float}):  # the saved shape: no loop
            return np.ones(len(col), bool), np.array(col, dtype=np.float64)  # None: NaN
        typed = np.fromiter((type(x) is float or (optional and x is None) for x in col), bool, len(col))
        return typed, np.array([x if type(x) is float else math.nan for x in col], dtype=np.float64)

    (ok_m, median), (ok_l, low), (ok_h, high) = (floats(c, False) for c in (median, low, high))
    (ok_lo, lo), (ok_hi, hi), (ok_r, step) = (floats(c, True) for c in (lo, hi, step))
    if ({int} >= set(map(type, rounds)) and {list} >= set(map(type, medians))
            and {np.ndarray} >= set(map(type, samples)) and {0} >= set(map(len, samples))):
        k = np.fromiter((min(x, 2**62) for x in rounds), np.int64, n)  # a count no list reaches
        m = np.fromiter(map(len, medians), np.int64, n)
        shaped = (k >= 1) & ((m == 0) | (m == k))
    else:
        shaped = np.fromiter((type(k) is int and k >= 1 and type(m) is list and (not m or len(m) == k)
                              and hasattr(s, "__len__") and len(s) == 0
                              for k, m, s in zip(rounds, medians, samples, strict=True)), bool, n)
    ok = ok_m & ok_l & ok_h & ok_lo & ok_hi & ok_r & shaped
    with np.errstate(invalid="ignore"):
        ok &= np.isfinite(median) & np.isfinite(low) & np.isfinite(high)
        ok &= (median > 0) & (low > 0) & (high > 0) & (low <= median) & (median <= high)
        # round medians: finite, > 0 and within the interval (_rounds_problem)
        kept = np.flatnonzero(ok)
        chosen = [medians[i] for i in kept.tolist()]
        items = list(itertools.chain.from_iterable(chosen))
        if items:
            owner = np.repeat(kept, np.fromiter(map(len, chosen), np.int64, len(chosen)))
            plain, m = floats(items, False)
            bad = ~plain | ~np.isfinite(m) | (m <= 0) | (m < low[owner]) | (m > high[owner])
            ok[owner[bad]] = False
        # no samples: the interval within the saved min and max, widened by the resolution
        # (_extremes_problem and _slack)
        step = np.where(np.isfinite(step) & (step >= 0), step, 0.0)
        checked = np.isfinite(lo) & np.isfinite(hi)
        lo_bound, hi_bound = lo - step, hi + step
        tol = 1e-9 * np.maximum(np.abs(lo_bound), np.abs(hi_bound))
        ok &= ~(checked & ((low < lo_bound - tol) | (high > hi_bound + tol)))
    return ok.tolist()


def _attributes(results, keys) -> list:
    """Each key's values over `results`, a list a key; None where a result has no such
    attribute (a dict has none: passing() leaves dicts to problem())."""
    from operator import attrgetter

    try:
        got = list(map(attrgetter(*keys), results))  # one call a result, not one a field
    except AttributeError:
        return [[getattr(r, k, None) for r in results] for k in keys]
    return [list(c) for c in zip(*got, strict=True)] if got else [[] for _ in keys]


def _slack(result) -> float:
    """How far a saved interval may reach past its samples: the clock's resolution it was
    widened by (bench/_stats.resolve), or nothing where the result does not say."""
    step = _finite(_get(result, "resolution_ms"))
    return 0.0 if step is None or step < 0 else step


def _rounds_problem(result, low: float, high: float) -> str | None:
    """`rounds` is what tells a gate the interval covers the spread between runs: it must be a
    count, and every saved round median must lie in the interval that claims to span them."""
    rounds = _get(result, "rounds")
    if rounds is None:
        return None
    if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 1:
        return f"'rounds' is {rounds!r} (must be an int >= 1)"
    medians = _get(result, "round_medians_ms")
    if not medians:
        return None
    if len(medians) != rounds:
        return f"'round_medians_ms' has {len(medians)} medians for 'rounds' {rounds}"
    for k, m in enumerate(medians):
        why = _number_problem(f"round_medians_ms[{k}]", m)
        if why is not None:
            return why
        if not low <= m <= high:
            return (f"'round_medians_ms'[{k}] {m:.6g} lies outside the interval 'ci_low_ms' .. "
                    f"'ci_high_ms' {low:.6g} .. {high:.6g} that spans the rounds")
    return None


def _outside(low: float, high: float, lo_bound: float, hi_bound: float) -> bool:
    tol = 1e-9 * max(abs(lo_bound), abs(hi_bound))
    return low < lo_bound - tol or high > hi_bound + tol


def _extremes_problem(result, low: float, high: float) -> str | None:
    """Without samples: the interval's ends are order statistics (or round medians) of the
    samples, so they cannot lie beyond the saved min and max by more than the resolution."""
    lo, hi = _finite(_get(result, "min_ms")), _finite(_get(result, "max_ms"))
    if lo is None or hi is None:
        return None  # pytest-benchmark files and older saves may lack them: nothing to check
    step = _slack(result)
    if _outside(low, high, lo - step, hi + step):
        return (f"the interval 'ci_low_ms' .. 'ci_high_ms' {low:.6g} .. {high:.6g} reaches past "
                f"the samples' 'min_ms' .. 'max_ms' {lo:.6g} .. {hi:.6g}")
    return None


def _interval_problem(result, samples, low: float, high: float) -> str | None:
    """With samples: the saved interval must hold the samples' own 95 % interval of the median
    and reach no further than the round medians and the clock's resolution allow."""
    from .. import _stats

    own_low, own_high = _stats.median_ci(samples)
    if own_low != own_low:  # fewer than 6 samples: there is no interval to hold
        return None
    medians = list(_get(result, "round_medians_ms") or [])
    step = _slack(result)
    if _get(result, "resolution_ms") is None:  # saved before resolution_ms: widened by interval()
        step = max(step, own_high - own_low)
    if (low > own_low * (1 + 1e-9) or high < own_high * (1 - 1e-9)
            or _outside(low, high, min([own_low, *medians]) - step, max([own_high, *medians]) + step)):
        return (f"the interval 'ci_low_ms' .. 'ci_high_ms' {low:.6g} .. {high:.6g} is not its "
                f"samples' ({own_low:.6g} .. {own_high:.6g}, resolution {step:.3g} ms)")
    return None


def _is_nan(value) -> bool:
    return isinstance(value, float) and math.isnan(value)


def _samples_problem(samples, median: float) -> str | None:
    import numpy as np

    try:
        a = np.asarray(samples, dtype=np.float64)
    except (TypeError, ValueError, OverflowError):
        return "'samples' must be a list of numbers"
    if a.ndim != 1:
        return "'samples' must be a flat list of numbers"
    bad = np.flatnonzero(~np.isfinite(a) | (a < 0))
    if bad.size:
        return f"'samples'[{int(bad[0])}] is {float(a[bad[0]])!r} (samples must be finite and >= 0)"
    own = float(np.median(a))
    if not math.isclose(own, median, rel_tol=_MEDIAN_RTOL, abs_tol=0.0):
        return (f"'median_ms' {median:.9g} is not the median of its own {a.size} samples "
                f"({own:.9g})")
    return None


def check(result, where: str) -> None:
    """ValueError '<where>: <problem>' unless `result` can be gated on."""
    why = problem(result)
    if why is not None:
        raise ValueError(f"{where}: {why}")


def interval(result) -> tuple[float, float]:
    """The interval of the median to compare: the saved one, which since `resolution_ms` exists
    already holds the clock's resolution; for results saved before, widened here from their
    samples as _stats.resolve() does, so that quantised samples never claim a zero-width
    interval."""
    low, high = _get(result, "ci_low_ms"), _get(result, "ci_high_ms")
    if _get(result, "resolution_ms") is not None:
        return low, high
    samples = _get(result, "samples")
    if samples is None or not len(samples):
        return low, high
    from .._stats import resolve  # NumPy: only for results saved before resolution_ms

    return resolve(samples, low, high)[:2]


# ---- the decision rule ---------------------------------------------------------------------------
#
# Every gate calls decide(). "slower" needs both (1) an effect beyond a minimum threshold and
# (2) an interval that covers the spread between runs; where the interval covers one run only,
# a difference it shows is "inconclusive" (it may be drift between runs), never "slower".
#
# DEFAULT_THRESHOLD_PCT (host clock): on the CPU machine (docs/benchmarks.md, gate error rates)
# the median of unchanged code moved by 1.25 % at the 99th percentile between consecutive runs on
# a quiet machine, and by up to 10 % under neighbours' load (issue 44). Interleaved A/B rounds
# cancel most of that drift; 5 % is about four times the quiet spread, small enough that a
# planted 10 % slowdown is caught in one A/B run and large enough that an interval which spans
# rounds does not flag the run-to-run wobble it sampled only a few times.
# DEVICE_THRESHOLD_PCT (CUPTI and event clocks): kernel times move far less between runs (12
# pairs of a 5 us kernel on an H200 had identical medians, docs/benchmarks.md); 2 % lets an A/B
# run catch a planted 5 % there. bench_gate_flags.py --gpu measures both rates for it.
DEFAULT_THRESHOLD_PCT = 5.0
DEVICE_THRESHOLD_PCT = 2.0
# Saved results: rounds on each side for their intervals (the hull of the round medians,
# bench/rounds.py) to cover the spread between runs. With R exchangeable rounds a side, all R
# medians of one exceed all R of the other with probability 1 / C(2R, R): 5 % for R = 3.
MIN_ROUNDS = 3
# A/B in one run: paired rounds for a distribution-free 95 % interval of the median ratio.
MIN_PAIRED_ROUNDS = 6

VERDICTS = ("slower", "faster", "same", "inconclusive", "unknown")


@dataclass(frozen=True)
class Decision:
    """A gate's verdict on ratio = new / reference and the evidence it rests on.

    verdict: 'slower' | 'faster' (beyond the threshold, on an interval spanning runs), 'same'
    (the whole interval within ±threshold), 'inconclusive' (one run's interval, too few rounds,
    or an interval reaching past the threshold on one side only partly), 'unknown' (a number
    that is not finite: it never passes a gate). `basis` says what the interval covers."""

    verdict: str
    ratio: float
    low: float
    high: float
    threshold_pct: float
    basis: str
    why: str

    @property
    def fails(self) -> bool:
        """Whether a gate fails on it: slower, or a number it cannot trust."""
        return self.verdict in ("slower", "unknown")

    def to_dict(self) -> dict:
        return asdict(self)

    def line(self, subject: str = "", clock: str | None = None) -> str:
        """One line for a CI log: verdict, ratio and interval, what the interval covers (clock,
        rounds), the threshold, and why."""
        head = f"{subject}: " if subject else ""
        return head + _line(self.verdict, self.ratio, self.low, self.high, self._tail(clock))

    def _tail(self, clock: str | None) -> str:
        """The line's words after the numbers (the same for every pair of one case: stored_pairs)."""
        clock = f", {clock} clock" if clock else ""
        return f" over {self.basis}{clock}, threshold ±{self.threshold_pct:g} %: {self.why}"


def _line(verdict: str, ratio: float, low: float, high: float, tail: str) -> str:
    interval = "" if not math.isfinite(low) else f" (95 % {_fmt(low)} .. {_fmt(high)})"
    return f"{verdict}: {_fmt(ratio)}x{interval}{tail}"


def _fmt(x: float) -> str:
    return f"{x:.4g}" if math.isfinite(x) else str(x)


def default_threshold(clock: str | None) -> float:
    """The default minimum effect for results timed by `clock` ('cupti', 'gpu', 'host', or
    several joined by '+'): the device clocks' where every one is a device clock."""
    clocks = (clock or "host").split("+")
    return DEVICE_THRESHOLD_PCT if all(c in ("cupti", "gpu") for c in clocks) else DEFAULT_THRESHOLD_PCT


def threshold_pct(value, clock: str | None = None) -> float:
    """A threshold in percent, checked: a finite number >= 0 (None: the default for `clock`)."""
    if value is None:
        return default_threshold(clock)
    pct = _finite(value)
    if pct is None or pct < 0:
        raise ValueError(f"the threshold must be a finite number of percent >= 0, got {value!r}")
    return pct


def decide(ratio: float, low: float, high: float, *, threshold: float | None = None,
           between_runs: bool, basis: str, too_few: str | None = None) -> Decision:
    """The verdict on `ratio` (new / reference) with 95 % interval [low, high].

    threshold: the minimum effect in percent (None: DEFAULT_THRESHOLD_PCT, the host clock's). between_runs:
    whether the interval covers the spread between runs (rounds on both sides, or paired A/B
    rounds); without it a difference is 'inconclusive'. too_few: why there is no interval (too
    few rounds or samples), making a NaN interval 'inconclusive' instead of 'unknown'. Pure."""
    t = threshold_pct(threshold)
    up, down = 1 + t / 100, 1 / (1 + t / 100)

    def verdict(v, why):
        return Decision(v, ratio, low, high, t, basis, why)

    if not (isinstance(ratio, (int, float)) and math.isfinite(ratio) and ratio > 0):
        return verdict("unknown", "the ratio is not a finite positive number (a gate never passes it)")
    if too_few is not None and not (math.isfinite(low) and math.isfinite(high)):
        return verdict("inconclusive", f"no 95 % interval: {too_few}")
    if not (math.isfinite(low) and math.isfinite(high) and 0 <= low <= high):
        return verdict("unknown", "the interval is not finite (a gate never passes it)")
    if low > up or high < down:
        direction = "slower" if low > up else "faster"
        if between_runs:
            return verdict(direction, f"the whole interval is {direction} by more than the threshold")
        return verdict("inconclusive", f"{direction} by more than the threshold within one run, "
                       "which cannot tell a change from drift between runs; measure with rounds "
                       f"(>= {MIN_ROUNDS} a side) or A/B in one run")
    if down <= low and high <= up:
        return verdict("same", "the whole interval is within the threshold")
    return verdict("inconclusive", "the interval reaches past the threshold: more rounds or "
                   "samples would tell")


def stored_basis(rounds_a: int, rounds_b: int) -> tuple[bool, str]:
    """(between_runs, basis) for two saved results measured in rounds_a and rounds_b rounds."""
    fewest = min(rounds_a or 1, rounds_b or 1)
    if fewest >= MIN_ROUNDS:
        return True, f"{fewest}+ rounds a side"
    return False, "one run a side" if fewest == 1 else f"{fewest} rounds a side (< {MIN_ROUNDS})"


def stored(ratio: float, low: float, high: float, rounds_new: int, rounds_ref: int,
           threshold: float | None = None, clock: str | None = None) -> Decision:
    """decide() for two saved results (gp.compare, `gpuprofile compare`, the pytest plugin):
    their interval covers the spread between runs only with MIN_ROUNDS rounds on each side.
    `clock` ('cupti', 'host+cupti', ...) picks the default threshold."""
    between, basis = stored_basis(rounds_new, rounds_ref)
    return decide(ratio, low, high, threshold=threshold_pct(threshold, clock), between_runs=between,
                  basis=basis)


def stored_pairs(news: list, refs: list, threshold: float | None = None) -> tuple:
    """stored() for many pairs at once (a compare of 200k pairs: 45 us a pair one by one):
    (ratio, low, high, verdicts, lines), lists of one item a pair of news[i] against refs[i],
    each item what bench/result.compared_row(trusted=True) gives for that pair ("baseline" and
    no line where news[i] is refs[i]). Only for results passing() found True: their interval is
    the saved one, every number in it finite and > 0, rounds an int. The numbers are the same
    float divisions; the verdict is decide()'s, classified here with NumPy and then taken from
    decide() itself once for each case (verdict, direction, threshold, rounds, clocks), whose
    line differs only in its numbers. tests/bench/test_gate.py holds the two paths to the same
    rows."""
    import numpy as np

    n = len(news)
    if len(refs) != n:
        raise ValueError(f"stored_pairs: {n} results against {len(refs)}")
    if n == 0:
        return [], [], [], [], []
    (m_new, low_new, high_new, rounds_new, clock_new), (m_ref, low_ref, high_ref, rounds_ref, clock_ref) = (
        _attributes(results, ("median_ms", "ci_low_ms", "ci_high_ms", "rounds", "clock"))
        for results in (news, refs))
    with np.errstate(all="ignore"):  # a quotient beyond a float's range is inf, as in Python
        ratio = np.array(m_new, dtype=np.float64) / np.array(m_ref, dtype=np.float64)
        low = np.array(low_new, dtype=np.float64) / np.array(high_ref, dtype=np.float64)
        high = np.array(high_new, dtype=np.float64) / np.array(low_ref, dtype=np.float64)
    # each pair's threshold and what its intervals cover, once for each pair of clocks and rounds
    clocks = list(zip(clock_new, clock_ref, strict=True))
    rounds = list(zip(rounds_new, rounds_ref, strict=True))
    thresholds = {key: threshold_pct(threshold, f"{key[0]}+{key[1]}") for key in set(clocks)}
    bases = {key: stored_basis(*key) for key in set(rounds)}
    t = np.array([thresholds[key] for key in clocks], dtype=np.float64)
    between = np.array([bases[key][0] for key in rounds], dtype=bool)
    up = 1 + t / 100
    down = 1 / up
    # decide()'s branches in its order: 0 unknown ratio, 1 unknown interval, 2 slower, 3 faster
    # (each "inconclusive" without rounds), 4 same, 5 reaching past the threshold
    with np.errstate(invalid="ignore"):
        case = np.full(n, 5, dtype=np.int8)
        case[(down <= low) & (high <= up)] = 4
        case[high < down] = 3
        case[low > up] = 2
        case[~(np.isfinite(low) & np.isfinite(high) & (low >= 0) & (low <= high))] = 1
        case[~(np.isfinite(ratio) & (ratio > 0))] = 0
    ratio, low, high, t, between, case = (a.tolist() for a in (ratio, low, high, t, between, case))
    decided: dict = {}
    verdicts, lines = [], []
    for i, (r, b, key, clock) in enumerate(zip(news, refs, rounds, clock_new, strict=True)):
        if r is b:
            verdicts.append("baseline")
            lines.append("")
            continue
        which = (case[i], t[i], key, clock)
        seen = decided.get(which)
        if seen is None:
            d = decide(ratio[i], low[i], high[i], threshold=t[i], between_runs=between[i],
                       basis=bases[key][1])
            seen = decided[which] = (d.verdict, d._tail(clock))
        verdicts.append(seen[0])
        lines.append(_line(seen[0], ratio[i], low[i], high[i], seen[1]))
    return ratio, low, high, verdicts, lines
