"""tests/background.py: the loop runs while the block does, and stops and is joined
after it, also when the block raises."""

from __future__ import annotations

import threading

import pytest

from tests.background import running_in_background

pytestmark = pytest.mark.unit


def test_the_loop_runs_during_the_block_and_is_stopped_and_joined_after() -> None:
    started = threading.Event()
    threads: list[threading.Thread] = []

    def loop(stop: threading.Event) -> None:
        threads.append(threading.current_thread())
        started.set()
        stop.wait()

    with running_in_background(loop):
        assert started.wait(5)
        assert threads[0].is_alive()
    assert not threads[0].is_alive()  # stopped and joined: nothing runs after the block


def test_a_raising_block_still_stops_the_loop() -> None:
    threads: list[threading.Thread] = []

    def loop(stop: threading.Event) -> None:
        threads.append(threading.current_thread())
        stop.wait()

    with pytest.raises(RuntimeError), running_in_background(loop):
        raise RuntimeError("the block failed")
    assert threads and not threads[0].is_alive()
