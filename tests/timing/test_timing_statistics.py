"""The significance test: exact and approximate Mann-Whitney U p-values."""

from __future__ import annotations

import math
import random

import pytest

from pytest_folio.timing.statistics import (
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


# scipy.stats.mannwhitneyu (scipy 1.17.1; method "exact" where the samples have no ties
# and m*n <= 400, else "asymptotic") on the samples _samples(seed) draws: (U, p).
SCIPY = {
    0: (162.0, 0.28729375531145296),
    1: (63.0, 0.8822742474916387),
    2: (418.0, 0.9748545661415647),
    3: (40.0, 0.01750932725445469),
    4: (17.5, 0.014323302436677073),
    5: (93.0, 0.6325957255976118),
    6: (189.0, 0.0800766631709415),
    7: (16.0, 0.06679594914889034),
    8: (26.5, 0.03224784250234445),
    9: (120.0, 0.1468777565987026),
    10: (31.0, 0.9630522397124783),
    11: (205.0, 0.529777553704261),
    12: (87.5, 0.9187407426900119),
    13: (36.0, 0.19711609340092315),
    14: (57.0, 0.7909781584191156),
    15: (9.0, 0.888888888888889),
    16: (96.0, 0.5495948466658969),
    17: (97.0, 0.17757546793820253),
    18: (13.5, 0.5621472481205246),
    19: (22.0, 0.3523076923076923),
    20: (308.0, 0.2558153100610766),
    21: (61.0, 0.5814921662444881),
    22: (17.5, 0.2818623767139614),
    23: (116.0, 0.38415168283322443),
    24: (140.0, 0.3973118563206871),
    25: (190.0, 0.8336886688325504),
    26: (78.5, 0.3723960838040371),
    27: (181.0, 0.8776668723479697),
    28: (55.5, 0.7098304840882494),
    29: (27.0, 0.4094861660079052),
    30: (120.0, 0.0022090547889265103),
    31: (7.0, 0.23391812865497075),
    32: (12.5, 0.5958830905651777),
    33: (45.0, 0.17947591860635337),
    34: (68.0, 0.04999392428702472),
    35: (179.0, 0.007421330100635609),
    36: (10.5, 0.3070813360572321),
    37: (210.0, 0.4663661382947375),
    38: (132.0, 0.3036305459495191),
    39: (24.0, 0.17281411399058458),
}


def _samples(seed: int) -> tuple[list[float], list[float]]:
    r = random.Random(seed)
    m, n = r.randint(2, 30), r.randint(2, 30)
    ties = seed % 2 == 0
    x = [float(r.randint(0, 6)) if ties else r.random() for _ in range(m)]
    y = [float(r.randint(1, 7)) if ties else r.random() + 0.1 for _ in range(n)]
    return x, y


@pytest.mark.parametrize("seed", sorted(SCIPY))
def test_agrees_with_scipy(seed: int) -> None:
    u, p = mann_whitney_u(*_samples(seed))
    want_u, want_p = SCIPY[seed]
    assert u == pytest.approx(want_u)
    assert p == pytest.approx(want_p, rel=1e-9, abs=1e-12)
