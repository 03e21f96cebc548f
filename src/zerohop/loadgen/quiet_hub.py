"""Work a load-generating process does before its window so that nothing stalls the
hub while streams are read: what would otherwise run in the middle of the load."""

from __future__ import annotations

import gc

__all__ = ["keep_collector_off_the_reads", "warm_locust_stop"]


def warm_locust_stop() -> None:
    """Locust's `runner.stop()` logs its caller with `inspect.stack()`, and the first
    such call in a process resolves the real path of every loaded module (900-1,700 of
    them) and reads each frame's source: 70-340 ms with the hub held on 2 shared cores,
    at the very end of the window while the last requests stream
    (tests/bench/bench_loop_lag_sources.py). Paid here, before the window, it is a
    lookup later (0.1-0.3 ms)."""
    import inspect
    import linecache

    import locust.main
    import locust.runners

    for module in (locust.main, locust.runners):
        if module.__file__:
            linecache.getlines(module.__file__)
    inspect.stack()


def keep_collector_off_the_reads() -> None:
    """A garbage collection stalls every stream's reads, and a token left unread while
    the next one lands loses its own arrival stamp. Everything built so far (Locust,
    plans, prompts) lives for the whole run: frozen, the collector skips it; and full
    collections, which still take milliseconds with gevent's objects, run every 10,000
    middle-generation ones instead of every 10 (the young generations, which take the
    short-lived garbage, keep their defaults)."""
    gc.freeze()
    young, middle, _old = gc.get_threshold()
    gc.set_threshold(young, middle, 10_000)
