"""`python -m zerohop ARGS` as a child process, without paying the start-up each time.

A bad-input test claims what a child process shows: its exit status, its stdout and
stderr, and the files it wrote. A cold `python -m zerohop` spends seconds importing
(numpy, pandas, scipy) before it reads its first flag, and the suite starts dozens of them
only to see them refuse. Here one server process imports the command line once; each call
forks a fresh child from it that runs the `zerohop` module as `-m` does (runpy, `__main__`)
with the call's arguments, working folder, environment and its own stdout/stderr files, then
exits the way the interpreter would: `SystemExit`'s code, 1 after an uncaught exception's
traceback. The child is a real process, so what it writes, prints and returns is its own,
and a full run in it starts its target and Locust as a cold one does. What it does not
exercise is the cold import itself: tests that signal the process or time its start keep
a cold `python -m zerohop`, and so does `test_unreachable_host_exits_3`.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

_SERVER = r'''
import atexit, importlib, json, os, runpy, sys, traceback
import zerohop.cli
for target in zerohop.cli.SUBCOMMANDS.values():  # what `zerohop --help` imports
    try:
        importlib.import_module(target.split(":")[0])
    except ImportError:
        pass
print("ready", flush=True)
for line in sys.stdin:
    call = json.loads(line)
    pid = os.fork()
    if pid == 0:
        os.setsid()
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        for fd, path in ((1, call["stdout"]), (2, call["stderr"])):
            os.dup2(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644), fd)
        os.chdir(call["cwd"])
        os.environ.clear()
        os.environ.update(call["env"])
        sys.argv = ["zerohop", *call["args"]]
        code = 0
        try:
            runpy.run_module("zerohop", run_name="__main__", alter_sys=True)
        except SystemExit as exc:
            if exc.code is None:
                code = 0
            elif isinstance(exc.code, int):
                code = exc.code
            else:
                print(exc.code, file=sys.stderr)
                code = 1
        except BaseException:
            traceback.print_exc()
            code = 1
        try:
            atexit._run_exitfuncs()
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)
    print(json.dumps({"pid": pid}), flush=True)
    _, status = os.waitpid(pid, 0)
    print(json.dumps({"status": os.waitstatus_to_exitcode(status)}), flush=True)
'''


class ForkServer:
    """Runs `zerohop ARGS` in a child forked from one preloaded server; one call at a time.
    A call cut short (a timeout, an interrupt) leaves the server broken: `shared()` then
    starts a new one rather than read the old call's answer as the next one's."""

    def __init__(self) -> None:
        self._workdir = Path(tempfile.mkdtemp(prefix="zerohop-fork-"))
        self._lock = threading.Lock()
        self._server = subprocess.Popen(
            [sys.executable, "-c", _SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            bufsize=0, env={**os.environ, "PYTHONUNBUFFERED": "1"}, start_new_session=True)
        self._pending = b""
        self._calls = 0
        self.broken = False
        assert self._readline(timeout=120) == "ready", "the zerohop fork server did not start"

    def run(self, args: list[str], *, timeout: float = 60, cwd: Path | None = None,
            env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        """Like `subprocess.run([python, -m, zerohop, *args], capture_output=True)`."""
        with self._lock:
            assert not self.broken, "a call to this fork server was cut short"
            self._calls += 1
            out = self._workdir / f"{self._calls}.out"
            err = self._workdir / f"{self._calls}.err"
            call = {"args": args, "cwd": str(cwd or Path.cwd()),
                    "env": dict(os.environ) if env is None else env,
                    "stdout": str(out), "stderr": str(err)}
            assert self._server.stdin is not None
            pid = None
            try:
                self._server.stdin.write(json.dumps(call).encode() + b"\n")
                pid = json.loads(self._readline(timeout=30))["pid"]
                status = json.loads(self._readline(timeout=timeout))["status"]
            except BaseException as exc:
                self.broken = True
                if pid is not None:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(pid, signal.SIGKILL)
                self.close()
                if isinstance(exc, TimeoutError):
                    raise subprocess.TimeoutExpired(["zerohop", *args], timeout) from None
                raise
            try:
                return subprocess.CompletedProcess(["zerohop", *args], status,
                                                   out.read_text(), err.read_text())
            finally:
                out.unlink(missing_ok=True)
                err.unlink(missing_ok=True)

    def _readline(self, timeout: float) -> str:
        """The server's next line, read from its pipe unbuffered so `select` sees it all."""
        assert self._server.stdout is not None
        fd = self._server.stdout.fileno()
        deadline = time.monotonic() + timeout
        while b"\n" not in self._pending:
            ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                raise TimeoutError
            chunk = os.read(fd, 65536)
            if not chunk:
                raise RuntimeError(f"the zerohop fork server exited ({self._server.poll()})")
            self._pending += chunk
        line, self._pending = self._pending.split(b"\n", 1)
        return line.decode().strip()

    def close(self) -> None:
        """End the server (its stdin closed, then SIGKILL if it lingers) and its folder."""
        if self._server.stdin is not None and not self._server.stdin.closed:
            with contextlib.suppress(OSError):
                self._server.stdin.close()
        try:
            self._server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._server.pid, signal.SIGKILL)
            self._server.wait(timeout=10)
        shutil.rmtree(self._workdir, ignore_errors=True)


_shared: ForkServer | None = None


def shared() -> ForkServer:
    """The test session's one fork server, started on first use, closed at exit."""
    global _shared
    if _shared is None or _shared.broken:
        _shared = ForkServer()
        atexit.register(_shared.close)
    return _shared


class ForkedZerohop:
    """`zerohop ARGS` forked from the session's current server (`shared()`)."""

    def run(self, args: list[str], *, timeout: float = 60, cwd: Path | None = None,
            env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        return shared().run(args, timeout=timeout, cwd=cwd, env=env)


@pytest.fixture(scope="session")
def forked_zerohop() -> ForkedZerohop:
    """The preloaded `zerohop` (integration tests only: it starts processes)."""
    return ForkedZerohop()
