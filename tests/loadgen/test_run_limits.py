"""--requests and --max-concurrency inside one process: the shares add up to the total,
the budget says when a process is done, and the concurrency cap holds its slots in
arrival order and reports how long an arrival queued (greenlets only: no socket)."""

from __future__ import annotations

import time

import gevent
import pytest

from zerohop.loadgen.run_limits import ConcurrencyCap, RequestBudget, held_at_cap, share

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("total, count", [(10, 3), (2, 5), (7, 1), (1000, 7)])
def test_shares_add_up_to_the_total(total: int, count: int) -> None:
    parts = [share(total, i, count) for i in range(count)]
    assert sum(parts) == total and max(parts) - min(parts) <= 1


def test_budget_is_done_once_every_request_taken_has_ended() -> None:
    budget = RequestBudget(2)
    assert budget.take() and budget.take() and not budget.take()
    assert budget.spent and not budget.done
    budget.finish()
    assert not budget.done
    budget.finish()
    assert budget.done
    unlimited = RequestBudget(None)
    assert all(unlimited.take() for _ in range(100)) and not unlimited.spent


def test_cap_holds_and_waits_are_what_each_arrival_queued() -> None:
    cap = ConcurrencyCap(2)
    hold_s = 0.05
    in_flight = [0]
    peak = [0]
    waits: dict[int, int] = {}

    def request(i: int, due_ns: int) -> None:
        waits[i] = cap.acquire(due_ns)
        in_flight[0] += 1
        peak[0] = max(peak[0], in_flight[0])
        gevent.sleep(hold_s)
        in_flight[0] -= 1
        cap.release()

    start = time.perf_counter_ns()
    # six arrivals at once: two run, four queue behind them in arrival order
    gevent.joinall([gevent.spawn(request, i, start) for i in range(6)])
    assert peak[0] == 2
    assert waits[0] == waits[1] == 0
    queued = [waits[i] for i in range(2, 6)]
    assert all(w > 0 for w in queued)
    # each pair waited for the pair before it to end: at least one hold longer
    floor_ns = hold_s * 1e9 * 0.9
    assert queued[2] - queued[0] >= floor_ns and queued[3] - queued[1] >= floor_ns


def test_an_arrival_that_finds_a_free_slot_did_not_queue() -> None:
    cap = ConcurrencyCap(1)
    late_due = time.perf_counter_ns() - 5_000_000  # a dispatcher 5 ms late, nothing queued
    assert cap.acquire(late_due) == 0
    cap.release()


def test_a_saturated_cap_serves_each_workload_in_proportion_to_its_rate() -> None:
    """Two dispatchers, 3 and 1 arrivals per unit of schedule, behind one slot that is
    always busy: the slots go in due-time order, so 3 of every 4 go to the faster one
    (a first-come queue gave each dispatcher's one waiting arrival its turn: 1 to 1, the
    mix a `--max-concurrency` run showed before)."""
    cap = ConcurrencyCap(1)
    start = time.perf_counter_ns() - 10**9  # every arrival already due: a backlog
    served: list[str] = []
    limit = 80

    def dispatcher(name: str, gap_ns: int) -> None:
        due = start
        while len(served) < limit:
            cap.acquire(due)
            served.append(name)
            gevent.spawn(_hold_then_release, cap)
            due += gap_ns

    gevent.joinall([gevent.spawn(dispatcher, "fast", 1_000),
                    gevent.spawn(dispatcher, "slow", 3_000)])
    counts = {name: served[:limit].count(name) for name in ("fast", "slow")}
    assert counts["fast"] == pytest.approx(3 * counts["slow"], abs=3), counts


def _hold_then_release(cap: ConcurrencyCap) -> None:
    gevent.sleep(0.001)
    cap.release()


def test_closing_the_cap_turns_every_waiting_arrival_away() -> None:
    """The end of the run's window: the arrivals still waiting get no slot (acquire
    returns None: the dispatcher keeps them as not sent), the one in flight keeps its
    own, and a later arrival does not wait."""
    cap = ConcurrencyCap(1)
    rt = type("Runtime", (), {"extras": {"concurrency_cap": cap}})()
    start = time.perf_counter_ns()
    assert cap.acquire(start) == 0  # in flight
    got: dict[int, int | None] = {}
    waiting = [gevent.spawn(lambda i: got.__setitem__(i, cap.acquire(start + i)), i)
               for i in (3, 1, 2)]
    gevent.sleep(0)
    assert held_at_cap(rt) == (3, start + 1)  # the oldest due first
    cap.close()
    gevent.joinall(waiting)
    assert got == {1: None, 2: None, 3: None} and held_at_cap(rt) == (0, None)
    assert cap.acquire(start + 4) is None
    cap.release()  # the one in flight ends: nothing was handed over
    assert cap.waiting == 0


def test_a_full_queue_turns_the_next_arrival_away() -> None:
    """At most `max_waiting` arrivals wait (each holds its prompt): the dispatcher keeps
    one more as not sent instead of holding it."""
    cap = ConcurrencyCap(1, max_waiting=2)
    start = time.perf_counter_ns()
    assert cap.acquire(start) == 0 and not cap.full
    waiting = [gevent.spawn(cap.acquire, start + i) for i in (1, 2)]
    gevent.sleep(0)
    assert cap.waiting == 2 and cap.full
    cap.release()  # the first waiting one gets the slot: room for one more
    gevent.sleep(0)
    assert cap.waiting == 1 and not cap.full
    cap.close()
    gevent.joinall(waiting)
