"""A sampler that runs on its own thread while a test's block runs.

Tests that watch something over a run (a process's RSS, how late sleeps wake up) fill a
list from a loop on a daemon thread; the loop must end once its `stop` event is set,
which happens, and the thread is joined, when the block ends, however it ends.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

__all__ = ["running_in_background"]


@contextmanager
def running_in_background(loop: Callable[[threading.Event], None]) -> Iterator[None]:
    """Run `loop(stop)` on a daemon thread for the block; then set `stop` and join."""
    stop = threading.Event()
    thread = threading.Thread(target=loop, args=(stop,), daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
