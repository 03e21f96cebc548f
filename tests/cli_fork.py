"""`python -m zerohop ARGS` as a child process, without paying the start-up each time.

A bad-input test claims what a child process shows: its exit status, its stdout and
stderr, and the files it wrote. A cold `python -m zerohop` spends seconds importing
(numpy, pandas, scipy) before it reads its first flag, and the suite starts dozens of them
only to see them refuse. Here one server process imports the command line once; each call
forks a fresh child from it that runs the `zerohop` module as `-m` does (runpy, `__main__`)
with the call's arguments, working folder, environment and its own stdout/stderr files, then
exits the way the interpreter would: `SystemExit`'s code, 1 after an uncaught exception's
traceback. The child is a real process, so what it writes, prints and returns is its own.
A run that really starts (a target, Locust) is left to a cold process: this is for commands
that stop before they start anything.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
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


class ForkedZerohop:
    """Runs `zerohop ARGS` in a child forked from one preloaded server; one call at a time."""

    def __init__(self, workdir: Path) -> None:
        self._workdir = workdir
        self._lock = threading.Lock()
        self._server = subprocess.Popen(
            [sys.executable, "-c", _SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            bufsize=0, env={**os.environ, "PYTHONUNBUFFERED": "1"}, start_new_session=True)
        self._pending = b""
        assert self._readline(timeout=120) == "ready", "the zerohop fork server did not start"
        self._calls = 0

    def run(self, args: list[str], *, timeout: float = 60, cwd: Path | None = None,
            env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        """Like `subprocess.run([python, -m, zerohop, *args], capture_output=True)`."""
        with self._lock:
            self._calls += 1
            out = self._workdir / f"{self._calls}.out"
            err = self._workdir / f"{self._calls}.err"
            call = {"args": args, "cwd": str(cwd or Path.cwd()),
                    "env": env if env is not None else {**os.environ, "PYTHONUNBUFFERED": "1"},
                    "stdout": str(out), "stderr": str(err)}
            assert self._server.stdin is not None
            self._server.stdin.write(json.dumps(call).encode() + b"\n")
            pid = json.loads(self._readline(timeout=30))["pid"]
            try:
                status = json.loads(self._readline(timeout=timeout))["status"]
            except TimeoutError:
                os.killpg(pid, signal.SIGKILL)
                self._readline(timeout=30)
                raise subprocess.TimeoutExpired(["zerohop", *args], timeout) from None
            return subprocess.CompletedProcess(["zerohop", *args], status,
                                               out.read_text(), err.read_text())

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
        if self._server.stdin is not None:
            self._server.stdin.close()
        try:
            self._server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(self._server.pid, signal.SIGKILL)
            self._server.wait(timeout=10)


@pytest.fixture(scope="session")
def forked_zerohop() -> Iterator[ForkedZerohop]:
    """One preloaded `zerohop` for the session's bad-input tests (integration: it starts
    processes)."""
    with tempfile.TemporaryDirectory(prefix="zerohop-fork-") as workdir:
        server = ForkedZerohop(Path(workdir))
        try:
            yield server
        finally:
            server.close()
