"""A Locust plugin file for the fidelity test's negative control: a greenlet that holds
the client's hub for ZEROHOP_HOG_HOLD_MS out of every ZEROHOP_HOG_CYCLE_MS, as blocking
code in a load generator would. The client stamps reads with the kernel's receive time,
so a hold shorter than the gap between two tokens costs nothing; a longer one leaves two
tokens in one socket, the kernel merges them under the later stamp, and the fidelity
check must notice.

Loaded beside `loadtests/` (`locust -f loadtests/,tests/loadgen/client_hog.py`); it defines
no user class, only a test_start listener.
"""

from __future__ import annotations

import os
import time

import gevent
from locust import events


def _hog(hold_s: float, release_s: float) -> None:
    while True:
        until = time.perf_counter() + hold_s
        while time.perf_counter() < until:
            pass
        gevent.sleep(release_s)


@events.test_start.add_listener
def _start_hog(environment, **_kwargs) -> None:  # type: ignore[no-untyped-def]
    hold_s = float(os.environ.get("ZEROHOP_HOG_HOLD_MS", "30")) / 1e3
    cycle_s = float(os.environ.get("ZEROHOP_HOG_CYCLE_MS", "100")) / 1e3
    gevent.spawn(_hog, hold_s, max(cycle_s - hold_s, 0.001))
