"""The supervisor's warm-up of the store code, run before it forks the zygote."""

from __future__ import annotations

import threading

from core.store.warm import warm_up


def test_warm_up_runs_the_store_and_leaves_no_thread_behind() -> None:
    # The zygote is forked right after: a thread left running would be a fork hazard.
    before = {t.ident for t in threading.enumerate()}

    warm_up()

    assert {t.ident for t in threading.enumerate()} == before
