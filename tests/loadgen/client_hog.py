"""A Locust plugin file for the fidelity test's negative control: a greenlet that holds
the client's hub for 3 ms out of every 13 ms, as blocking code in a load generator would.
Reads that arrive meanwhile are stamped late, and the fidelity check must notice.

Loaded beside `loadtests/` (`locust -f loadtests/,tests/loadgen/client_hog.py`); it defines
no user class, only a test_start listener.
"""

from __future__ import annotations

import time

import gevent
from locust import events

HOLD_S = 0.003
RELEASE_S = 0.010


def _hog() -> None:
    while True:
        until = time.perf_counter() + HOLD_S
        while time.perf_counter() < until:
            pass
        gevent.sleep(RELEASE_S)


@events.test_start.add_listener
def _start_hog(environment, **_kwargs) -> None:  # type: ignore[no-untyped-def]
    gevent.spawn(_hog)
