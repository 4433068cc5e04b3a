"""ddmin: the shortest failing subsequence, within a budget."""

from pytest_folio.shrink import ddmin


def test_a_failure_that_needs_two_items_shrinks_to_those_two() -> None:
    items = list(range(100))
    assert ddmin(items, lambda xs: 17 in xs and 63 in xs) == [17, 63]


def test_the_order_of_the_kept_items_is_the_original_order() -> None:
    assert ddmin("abcdefgh", lambda xs: "".join(xs).find("c") < "".join(xs).find("g")
                 and "c" in xs and "g" in xs) == ["c", "g"]


def test_a_failure_of_one_item_shrinks_to_it() -> None:
    assert ddmin(list(range(37)), lambda xs: 36 in xs) == [36]


def test_the_try_budget_stops_the_search_with_a_failing_sequence() -> None:
    calls: list[int] = []

    def fails(xs: list[int]) -> bool:
        calls.append(len(xs))
        return 5 in xs

    kept = ddmin(list(range(1000)), fails, max_tries=3)
    assert len(calls) == 3 and 5 in kept and len(kept) < 1000


def test_a_sequence_that_fails_only_whole_is_kept_whole() -> None:
    items = list(range(8))
    assert ddmin(items, lambda xs: len(xs) == 8) == items
