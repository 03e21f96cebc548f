"""The `unit` marker's promise, enforced: a unit test starts no process and opens no socket.

CI splits the suite into tiers by marker (.ci/run). A `unit` test that quietly starts the
embedded target or binds a port is slow and flaky on a loaded machine and says the wrong
thing about what it tests, so a `unit` item's setup (fixtures included), call and own
teardown run under a guard that refuses, with a message naming the rule:

- network sockets (any family but AF_UNIX) and any bind or connect, seen by an audit
  hook (PEP 578) however the code reached them, `from socket import socket` included;
- process starts: `subprocess`, `os.fork`/`forkpty`/`exec*`/`spawn*`/`posix_spawn`/
  `system` (audited), multiprocessing and anything else that forks through
  `_posixsubprocess.fork_exec` (patched, since multiprocessing's spawn is not audited);
- uvloop's servers, connections and subprocesses, which libuv makes without Python's
  socket module (patched on `uvloop.Loop`).

An unbound, unconnected AF_UNIX socket stays allowed: that is what `socket.socketpair()`
makes, and every asyncio event loop makes one for its self-pipe. A refusal the test
swallows (`except Exception`) still fails it: refusals are recorded and reported after
the phase.
"""

from __future__ import annotations

import contextlib
import platform
import socket
import sys
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.cli_fork import forked_zerohop  # `zerohop` children without the start-up
from tests.run_fixtures import hostile_run, make_run  # the synthetic results folders

__all__ = ["forked_zerohop", "hostile_run", "make_run"]

RULE = (
    "unit tier rule: a test marked `unit` starts no process and opens no socket "
    "(mark it `integration` instead)"
)

_PROCESS_EVENTS = frozenset({
    "subprocess.Popen", "os.fork", "os.forkpty", "os.exec", "os.spawn", "os.posix_spawn",
    "os.system",
})
_SOCKET_USE_EVENTS = frozenset({"socket.bind", "socket.connect"})
_UVLOOP_METHODS = (
    "create_server", "create_connection", "create_unix_server", "create_unix_connection",
    "create_datagram_endpoint", "subprocess_exec", "subprocess_shell",
)


class UnitTierViolation(RuntimeError):
    """Raised where a `unit` test starts a process or opens a socket."""


class _Guard:
    """Process-wide switch the audit hook reads: on only while a `unit` item runs."""

    def __init__(self) -> None:
        self.active = False
        self.refusals: list[str] = []

    def refuse(self, what: str) -> UnitTierViolation:
        self.refusals.append(what)
        return UnitTierViolation(f"{RULE}: {what}")


_GUARD = _Guard()


def _socket_family_name(family: int) -> str:
    with contextlib.suppress(ValueError):
        return socket.AddressFamily(family).name
    return str(family)


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if not _GUARD.active:
        return
    if event in _PROCESS_EVENTS:
        raise _GUARD.refuse(f"{event} {_short(args)}")
    if event in _SOCKET_USE_EVENTS:
        raise _GUARD.refuse(f"{event} to {args[1]!r}")
    if event == "socket.__new__":
        family = args[1]
        # -1: an existing descriptor being wrapped (socketpair, fromfd): its family is
        # only known later, and making it was audited already.
        if family not in (-1, socket.AF_UNIX):
            raise _GUARD.refuse(f"socket.socket({_socket_family_name(family)})")


def _short(args: tuple[Any, ...]) -> str:
    text = " ".join(repr(a) for a in args[:2])
    return text if len(text) <= 160 else text[:157] + "..."


sys.addaudithook(_audit)


def _refusing(what: str, original: Callable[..., Any]) -> Callable[..., Any]:
    def refused(*args: Any, **kwargs: Any) -> Any:
        if _GUARD.active:
            raise _GUARD.refuse(what)
        return original(*args, **kwargs)

    return refused


def _patch_unaudited_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    import _posixsubprocess
    import multiprocessing.process

    start = multiprocessing.process.BaseProcess.start
    monkeypatch.setattr(multiprocessing.process.BaseProcess, "start",
                        _refusing("multiprocessing Process.start", start))
    monkeypatch.setattr(_posixsubprocess, "fork_exec",
                        _refusing("_posixsubprocess.fork_exec", _posixsubprocess.fork_exec))
    try:  # imported here, so that a test importing it first is guarded all the same
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency on Linux
        return
    for name in _UVLOOP_METHODS:
        original = getattr(uvloop.Loop, name)
        monkeypatch.setattr(uvloop.Loop, name, _refusing(f"uvloop Loop.{name}", original))


@contextlib.contextmanager
def unit_tier_guard() -> Iterator[list[str]]:
    """While inside, starting a process or opening a socket raises UnitTierViolation;
    yields the list of refusals made (the ones the code under test swallowed included)."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        _patch_unaudited_starts(monkeypatch)
        _GUARD.refusals = []
        _GUARD.active = True
        try:
            yield _GUARD.refusals
        finally:
            _GUARD.active = False


def _guarded_phase(item: pytest.Item) -> Iterator[None]:
    if item.get_closest_marker("unit") is None:
        return (yield)
    with unit_tier_guard() as refusals:
        result = yield
    if refusals:
        pytest.fail(f"{RULE}; refused: " + "; ".join(refusals), pytrace=False)
    return result


def pytest_configure(config: pytest.Config) -> None:
    """The standard library runs `uname -p` the first time anything asks for the platform
    (storage/run_folder.py's machine info does); ask once here, so the rule judges what a test
    starts, not whether it happened to be the first to ask."""
    platform.platform()
    platform.processor()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    return (yield from _guarded_phase(item))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    return (yield from _guarded_phase(item))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """Guarded only where the item's own fixtures alone end: when the next item leaves its
    class or module, that module's and the session's fixtures (an integration test's
    server among them) end here too, and they are not this test's doing."""
    if nextitem is None or nextitem.parent is not item.parent:
        return (yield)
    return (yield from _guarded_phase(item))
