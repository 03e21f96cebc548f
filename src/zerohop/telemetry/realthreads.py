"""Real OS threads and locks, even after gevent has monkey-patched the process.

Locust patches `threading`, `_thread` and `time.sleep`: a `threading.Thread` started
afterwards is a greenlet, and a blocking NVML call or HTTP scrape inside it would stall
every simulated user. Samplers therefore run on the interpreter's original primitives,
fetched with `gevent.monkey.get_original` when gevent's monkey module is loaded (and the
stdlib ones otherwise). Waiting is done on a real lock with a timeout, which releases
the GIL and never touches a gevent hub.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any


def _original(module: str, name: str) -> Any:
    monkey = sys.modules.get("gevent.monkey")
    if monkey is not None:
        return monkey.get_original(module, name)
    return getattr(sys.modules.get(module) or __import__(module), name)


def real_lock() -> Any:
    """An unpatched `_thread.LockType` (acquire with timeout blocks only this thread)."""
    return _original("_thread", "allocate_lock")()


class StopSignal:
    """A one-shot stop flag a real thread can sleep on: `wait(t)` returns True as soon as
    `set()` is called (from any thread or greenlet), else False after t seconds."""

    def __init__(self) -> None:
        self._lock = real_lock()
        self._lock.acquire()
        self._set = False

    def set(self) -> None:
        if not self._set:
            self._set = True
            self._lock.release()

    def is_set(self) -> bool:
        return self._set

    def wait(self, timeout_s: float) -> bool:
        if self._set:
            return True
        if self._lock.acquire(True, max(0.0, timeout_s)):
            self._lock.release()
            return True
        return False


class RealThread:
    """A real OS thread running `target()`; `join` waits on a real lock."""

    def __init__(self, target: Callable[[], None], name: str) -> None:
        self.name = name
        self._target = target
        self._done = real_lock()
        self._done.acquire()
        self._started = False
        self.error: BaseException | None = None

    def start(self) -> None:
        start_new_thread = _original("_thread", "start_new_thread")
        self._started = True
        start_new_thread(self._run, ())

    def join(self, timeout_s: float) -> bool:
        """True when the thread has finished (or never started)."""
        if not self._started:
            return True
        if self._done.acquire(True, max(0.0, timeout_s)):
            self._done.release()
            return True
        return False

    def _run(self) -> None:
        try:
            self._target()
        except BaseException as exc:  # the thread must not die silently
            self.error = exc
            print(f"zerohop telemetry: thread {self.name} failed: {exc!r}", file=sys.stderr)
        finally:
            self._done.release()
