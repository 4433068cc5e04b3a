"""The significance test: exact and approximate Mann-Whitney U p-values."""

from __future__ import annotations

import math
import random

import pytest

from pytest_folio.timing.stats import (
    can_reach,
    mann_whitney_u,
    significance,
    u_distribution,
)


def test_u_distribution_counts_every_rank_order() -> None:
    for m in range(1, 7):
        for n in range(1, 7):
            counts = u_distribution(m, n)
            assert len(counts) == m * n + 1
            assert sum(counts) == math.comb(m + n, m)
            assert counts == counts[::-1]          # U and mn - U are equally likely
            assert min(counts) >= 1


def test_exact_p_of_complete_separation() -> None:
    u, p = mann_whitney_u([1, 2, 3, 4], [5, 6, 7, 8])
    assert u == 0
    assert p == pytest.approx(2 / 70)               # 2 of the C(8,4) orders are as extreme
    assert mann_whitney_u([5, 6, 7, 8], [1, 2, 3, 4]) == (16, pytest.approx(2 / 70))


def test_identical_samples_are_not_significant() -> None:
    assert mann_whitney_u([3, 3, 3], [3, 3, 3])[1] == 1.0
    assert significance([1.0, 1.0, 1.0, 1.0], [1.0, 1.0, 1.0, 1.0]).significant is False


def test_one_sample_a_side_cannot_be_tested() -> None:
    result = significance([20.25], [19.55])
    assert result.p_value is None and result.significant is None and not result.tested


def test_sizes_that_cannot_reach_the_level_are_not_tested() -> None:
    assert not can_reach(3, 3)                      # best p is 2/20 = 0.1
    assert can_reach(4, 4) and can_reach(2, 8) and not can_reach(2, 7)
    assert significance([1, 2, 3], [7, 8, 9]).tested is False
    assert significance([1, 2, 3, 4], [7, 8, 9, 10]).significant is True


def test_separated_samples_are_significant_and_overlapping_are_not() -> None:
    assert significance([10, 11, 12, 13, 14], [20, 21, 22, 23, 24]).significant is True
    assert significance([10, 12, 14, 16, 18], [11, 13, 15, 17, 19]).significant is False


@pytest.mark.parametrize("seed", range(40))
def test_agrees_with_scipy(seed: int) -> None:
    stats = pytest.importorskip("scipy.stats")
    r = random.Random(seed)
    m, n = r.randint(2, 30), r.randint(2, 30)
    ties = seed % 2 == 0
    x = [float(r.randint(0, 6)) if ties else r.random() for _ in range(m)]
    y = [float(r.randint(1, 7)) if ties else r.random() + 0.1 for _ in range(n)]
    exact = len(set(x + y)) == m + n and m * n <= 400
    want = stats.mannwhitneyu(x, y, method="exact" if exact else "asymptotic")
    u, p = mann_whitney_u(x, y)
    assert u == pytest.approx(want.statistic)
    assert p == pytest.approx(want.pvalue, rel=1e-9, abs=1e-12)
