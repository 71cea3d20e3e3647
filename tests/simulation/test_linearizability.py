"""The linearizability checker itself, on small hand-written histories."""

from __future__ import annotations

from tests.simulation.linearizability import History


def test_a_read_concurrent_with_a_write_may_see_either_value() -> None:
    history = History()
    write = history.invoke_write("k", "v1", 0)
    old = history.invoke_read("k", 1)
    new = history.invoke_read("k", 1)
    history.complete(old, 2, None)
    history.complete(new, 2, "v1")
    history.complete(write, 3)
    assert history.check() is None


def test_a_read_after_an_acknowledged_write_must_not_see_the_older_value() -> None:
    history = History()
    first = history.invoke_write("k", "v1", 0)
    history.complete(first, 1)
    second = history.invoke_write("k", "v2", 2)
    history.complete(second, 3)
    stale = history.invoke_read("k", 4)
    history.complete(stale, 5, "v1")
    verdict = history.check()
    assert verdict is not None
    assert "no legal order" in verdict


def test_reads_must_not_go_back_in_time() -> None:
    """Two sequential reads during one long write: once the new value is seen, the old one is
    gone."""
    history = History()
    first = history.invoke_write("k", "v1", 0)
    history.complete(first, 1)
    history.invoke_write("k", "v2", 2)
    new = history.invoke_read("k", 3)
    history.complete(new, 4, "v2")
    old = history.invoke_read("k", 5)
    history.complete(old, 6, "v1")
    assert history.check() is not None


def test_a_write_with_unknown_outcome_may_take_effect_late_or_never() -> None:
    history = History()
    lost = history.invoke_write("k", "v1", 0)  # never answered
    before = history.invoke_read("k", 5)
    history.complete(before, 6, None)
    after = history.invoke_read("k", 7)
    history.complete(after, 8, "v1")
    assert lost.completed is None
    assert history.check() is None


def test_keys_are_independent_registers() -> None:
    history = History()
    a = history.invoke_write("a", "v1", 0)
    history.complete(a, 1)
    read_b = history.invoke_read("b", 2)
    history.complete(read_b, 3, None)
    read_a = history.invoke_read("a", 2)
    history.complete(read_a, 3, "v1")
    assert history.check() is None
