"""Queued server work runs one item per event-loop turn, so the engine's step (woken by
a timer or a future) is never held behind a burst of requests or finished streams."""

from __future__ import annotations

import asyncio

import pytest

from zerohop.sim.serving.http_server import OnePerTurn

pytestmark = pytest.mark.unit


def test_a_callback_due_now_runs_after_one_queued_item_not_after_all() -> None:
    order: list[str] = []

    async def scenario() -> None:
        turns = OnePerTurn()
        for i in range(5):
            turns.submit(order.append, f"work{i}")
        asyncio.get_running_loop().call_soon(order.append, "engine step")
        await asyncio.sleep(0.01)

    asyncio.run(scenario())
    assert order == ["work0", "engine step", "work1", "work2", "work3", "work4"]


def test_a_failing_item_does_not_stop_the_queue() -> None:
    done: list[int] = []

    def boom() -> None:
        raise RuntimeError("handler bug")

    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        loop.set_exception_handler(lambda _loop, _ctx: None)
        turns = OnePerTurn()
        turns.submit(boom)
        turns.submit(done.append, 1)
        await asyncio.sleep(0.01)
        turns.submit(done.append, 2)  # idle queue: scheduled afresh
        await asyncio.sleep(0.01)

    asyncio.run(scenario())
    assert done == [1, 2]
