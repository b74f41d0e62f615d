"""Spawn keys: two identical calls of one message differ; a rerun (a fresh count, as
after a crash) gets the keys the first run made."""

from __future__ import annotations

from core.tasks.spawn_keys import SpawnKeys


def test_identical_calls_are_counted_and_a_rerun_repeats_the_keys() -> None:
    first = SpawnKeys()
    made = [first.key("m1", ["general-purpose", "p"]) for _ in range(2)]
    made.append(first.key("m1", ["general-purpose", "other"]))
    made.append(first.key("m2", ["general-purpose", "p"]))
    assert len(set(made)) == 4
    assert made[0].startswith("m1:") and made[0].endswith(":0") and made[1].endswith(":1")
    rerun = SpawnKeys()
    assert [rerun.key("m1", ["general-purpose", "p"]) for _ in range(2)] == made[:2]


def test_only_the_newest_counts_are_kept() -> None:
    keys = SpawnKeys(kept=2)
    keys.key("a", [1])
    keys.key("b", [1])
    keys.key("c", [1])  # "a" is dropped: its next key counts from 0 again
    assert keys.key("a", [1]).endswith(":0")
    assert keys.key("c", [1]).endswith(":1")
