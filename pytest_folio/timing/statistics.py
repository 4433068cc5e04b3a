"""What a list of samples says: its summary figures (min, median, IQR, MAD, ...) and
whether a change is real or noise (a two-sided Mann-Whitney U test on the raw samples).

Timings are skewed (a pass is never faster than the hardware, but often slower when the
machine is busy), so a rank test that assumes no distribution fits better than a t-test.
Without ties and with at most ``EXACT_MAX_PAIRS`` sample pairs the p-value is exact (the
U distribution from its generating function); otherwise it is the normal approximation
with tie and continuity correction. Sample sizes too small for any outcome to reach the
significance level (one sample a side, or 3 against 3, whose best p is 0.1) are not
tested at all: "not significant" would then say nothing about the change.

The regression gate (:func:`gate`) asks more than a p-value: a busy machine makes two
runs of identical code differ significantly, so a change fails the gate only with
enough samples, a run steadier than the limit and a gap between the two sides'
interquartile ranges larger than the limit; otherwise it says why it cannot decide,
as pyperf warns about an unstable benchmark instead of trusting it.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Callable, Sequence

from pytest_folio.options import TABLE_FIGURES

ALPHA = 0.05
EXACT_MAX_PAIRS = 400
METHOD = "two-sided Mann-Whitney U"
GATE_MIN_SAMPLES = 5        # a side: 5 against 5 separate at p = 0.008, and show an IQR


@dataclasses.dataclass(frozen=True)
class Significance:
    """The outcome of one test: p is None when there were too few samples to test."""

    p_value: float | None
    alpha: float = ALPHA

    @property
    def tested(self) -> bool:
        return self.p_value is not None

    @property
    def significant(self) -> bool | None:
        return None if self.p_value is None else self.p_value < self.alpha


def _ranks(values: Sequence[float]) -> tuple[list[float], list[int]]:
    """Average ranks (1-based) of ``values`` and the sizes of the tie groups."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    ties = []
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2 + 1
        if j > i:
            ties.append(j - i + 1)
        i = j + 1
    return ranks, ties


def u_distribution(m: int, n: int) -> list[int]:
    """How many of the C(m+n, m) rank orders give U = 0..m*n (no ties).

    The counts are the coefficients of the Gaussian binomial
    prod_{i=1..m} (1 - q^(n+i)) / (1 - q^i).
    """
    size = m * n + 1
    counts = [1] + [0] * (size - 1)
    for i in range(1, m + 1):
        for k in range(size - 1, n + i - 1, -1):
            counts[k] -= counts[k - n - i]
        for k in range(i, size):
            counts[k] += counts[k - i]
    return counts


def mann_whitney_u(x: Sequence[float], y: Sequence[float]) -> tuple[float, float]:
    """U statistic of ``x`` and the two-sided p-value of x and y coming from one distribution."""
    m, n = len(x), len(y)
    if m == 0 or n == 0:
        raise ValueError("both samples need at least one value")
    ranks, ties = _ranks([*x, *y])
    u1 = sum(ranks[:m]) - m * (m + 1) / 2
    u_max = max(u1, m * n - u1)
    if not ties and m * n <= EXACT_MAX_PAIRS:
        counts = u_distribution(m, n)
        upper = sum(counts[math.ceil(u_max):])
        return u1, min(1.0, 2 * upper / math.comb(m + n, m))
    total = m + n
    tie_term = sum(t ** 3 - t for t in ties) / (total * (total - 1))
    variance = m * n / 12 * ((total + 1) - tie_term)
    if variance <= 0:
        return u1, 1.0
    z = (u_max - m * n / 2 - 0.5) / math.sqrt(variance)
    return u1, min(1.0, math.erfc(max(z, 0.0) / math.sqrt(2)))


def can_reach(m: int, n: int, alpha: float = ALPHA) -> bool:
    """Whether m against n samples can give p < alpha at all (the fully separated case)."""
    return m > 0 and n > 0 and 2 / math.comb(m + n, m) < alpha


def significance(base: Sequence[float], patched: Sequence[float],
                 alpha: float = ALPHA) -> Significance:
    """Test base against patched; untested when the sample sizes cannot reach ``alpha``."""
    if not can_reach(len(base), len(patched), alpha):
        return Significance(None, alpha)
    return Significance(mann_whitney_u(base, patched)[1], alpha)


STATISTICS: dict[str, Callable[[Sequence[float]], float]] = {   # what a change compares
    "median": statistics.median,   # robust to one slow pass; the default
    "min": min,                    # noise only ever adds time: best on a busy machine
    "mean": statistics.fmean,
}


def center(samples: Sequence[float], statistic: str = "median") -> float:
    """The figure a table shows for a sample list (see :data:`STATISTICS`)."""
    return float(STATISTICS[statistic](samples))


def quartiles(samples: Sequence[float]) -> tuple[float, float]:
    """The first and third quartiles (inclusive method, as pytest-benchmark's IQR uses);
    one sample is its own quartiles."""
    if len(samples) < 2:
        return float(samples[0]), float(samples[0])
    q1, _, q3 = statistics.quantiles(samples, n=4, method="inclusive")
    return q1, q3


def mad(samples: Sequence[float]) -> float:
    """The median absolute deviation from the median (pyperf's robust spread), unscaled."""
    middle = statistics.median(samples)
    return float(statistics.median(abs(s - middle) for s in samples))


@dataclasses.dataclass(frozen=True)
class Summary:
    """Every figure a table cell may show, of one non-empty list of samples."""

    n: int
    min: float
    median: float
    mean: float
    max: float
    q1: float
    q3: float
    mad: float
    stdev: float | None          # None for one sample

    @classmethod
    def of(cls, samples: Sequence[float]) -> Summary:
        if not samples:
            raise ValueError("a summary needs at least one sample")
        q1, q3 = quartiles(samples)
        return cls(n=len(samples), min=float(min(samples)),
                   median=float(statistics.median(samples)),
                   mean=statistics.fmean(samples), max=float(max(samples)), q1=q1, q3=q3,
                   mad=mad(samples),
                   stdev=statistics.stdev(samples) if len(samples) > 1 else None)

    @property
    def iqr(self) -> float:
        return self.q3 - self.q1

    def figure(self, name: str) -> float | None:
        """One of :data:`FIGURES` by name; a spread of one sample is None (unknown)."""
        if name in SPREADS and self.n < 2:
            return None
        return float(getattr(self, name))


LOCATIONS = ("min", "median", "mean", "max")     # where the samples lie
SPREADS = ("iqr", "mad", "stdev")                # how far apart they are
FIGURES = TABLE_FIGURES                         # what --folio-columns may choose


def relative_noise(samples: Sequence[float], lower_is_better: bool = True) -> float | None:
    """How far a run's own noise spreads its samples, as a fraction of their median: the
    IQR, or the distance from the median to the best sample when that is larger (a
    busy machine only ever adds time, so a median far from the best pass is noise even
    when the middle samples agree). None for fewer than two samples or a zero median."""
    if len(samples) < 2:
        return None
    middle = statistics.median(samples)
    if middle == 0:
        return None
    q1, q3 = quartiles(samples)
    best = min(samples) if lower_is_better else max(samples)
    return max(q3 - q1, abs(middle - best)) / abs(middle)


@dataclasses.dataclass(frozen=True)
class Verdict:
    """The gate's answer for one item: ``ok``, ``regressed`` or ``undecided``, and why."""

    outcome: str
    reason: str = ""


def gate(base: Sequence[float], patched: Sequence[float], worse_pct: float,
         limit_pct: float, lower_is_better: bool = True, alpha: float = ALPHA) -> Verdict:
    """Judge a change of ``worse_pct`` percent (positive: worse) against ``limit_pct``.

    Within the limit it is ``ok``, unless a side's own noise (:func:`relative_noise`) is
    larger than the limit: then a pass says as little as a failure would. Beyond the
    limit it is a regression only when each side has :data:`GATE_MIN_SAMPLES`, neither
    side is that noisy, the Mann-Whitney U test is significant, and the effect is larger
    than the limit by every measure: the compared statistic (``worse_pct``), the gap
    between the sides' interquartile ranges and the change in the best sample (the pass
    least touched by a busy machine). Anything short of that is ``undecided``, with the
    reason: it never fails a run.
    """
    noise = max(100 * (relative_noise(s, lower_is_better) or 0.0) for s in (base, patched))
    noisy = Verdict("undecided", f"too noisy to judge: the run's own noise is {noise:.0f}% "
                                 "of the median")
    if worse_pct <= limit_pct:
        return noisy if noise > limit_pct else Verdict("ok")
    if min(len(base), len(patched)) < GATE_MIN_SAMPLES:
        return Verdict("undecided", f"{len(base)} against {len(patched)} samples; the gate "
                                    f"needs {GATE_MIN_SAMPLES} a side (time more passes)")
    if noise > limit_pct:
        return noisy
    p = significance(base, patched, alpha).p_value
    if p is None or p >= alpha:
        return Verdict("undecided", "untested" if p is None else f"not significant (p={p:.3g})")
    sign = 1.0 if lower_is_better else -1.0
    b1, b3 = quartiles(base)
    p1, p3 = quartiles(patched)
    middle = abs(statistics.median(base)) or 1.0
    gap = 100 * ((p1 - b3) if lower_is_better else (b1 - p3)) / middle
    best_base = min(base) if lower_is_better else max(base)
    best_patched = min(patched) if lower_is_better else max(patched)
    best = 100 * sign * (best_patched - best_base) / (abs(best_base) or 1.0)
    if min(gap, best) <= limit_pct:
        return Verdict("undecided", f"p={p:.3g}, but the IQRs are {gap:.0f}% apart and the "
                                    f"best passes {best:+.0f}%")
    return Verdict("regressed", f"p={p:.3g}")
