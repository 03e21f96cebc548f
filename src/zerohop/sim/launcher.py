"""Start the sim (or the layer proxy) in its own process, for tests and `zerohop run`.

    with start_sim(["--gpu", "h100-sxm", "--model", "llama-3-8b"]) as sim:
        client = OpenAI(base_url=sim.url + "/v1", api_key="x")

The child is `python -m zerohop.sim ...` (or `-m zerohop.proxy`) with the same
interpreter, in a new session (its own process group); it reports the port it bound via
`--port-file` (port 0 = the OS picks), and `start_sim` returns once `/health` answers
200. On failure the error carries the tail of the child's stderr. `stop()` sends
SIGTERM, then SIGKILL to the whole group after `timeout_s`: no leftover processes.
"""

from __future__ import annotations

import contextlib
import http.client
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType

STDERR_TAIL_BYTES = 4000


class SimStartError(RuntimeError):
    """The child did not come up; the message includes its stderr tail."""


class SimProcess:
    """A running sim or proxy child process. Use as a context manager."""

    def __init__(
        self, proc: subprocess.Popen[bytes], port: int, workdir: Path, host: str = "127.0.0.1"
    ) -> None:
        self.proc = proc
        self.port = port
        self.pid = proc.pid
        self.host = host
        self.url = f"http://{host}:{port}"
        self._workdir = workdir

    @property
    def stderr_path(self) -> Path:
        return self._workdir / "stderr.log"

    def stderr_tail(self, limit: int = STDERR_TAIL_BYTES) -> str:
        return _tail(self.stderr_path, limit)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self, timeout_s: float = 5) -> None:
        """SIGTERM the child's group; SIGKILL it after `timeout_s`. Idempotent."""
        if self.proc.poll() is None:
            _signal_group(self.proc, signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                _signal_group(self.proc, signal.SIGKILL)
                self.proc.wait(timeout=5)
        # children of the child (the --layer proxy) share the group: sweep it
        _signal_group(self.proc, signal.SIGKILL)

    def __enter__(self) -> SimProcess:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"SimProcess(url={self.url!r}, pid={self.pid})"


def start_sim(
    args: Sequence[str] = (),
    *,
    port: int = 0,
    ground_truth: Path | None = None,
    env: Mapping[str, str] | None = None,
    startup_timeout_s: float = 30,
) -> SimProcess:
    """Run `python -m zerohop.sim ARGS --port PORT` and wait until it is healthy."""
    extra = ["--port", str(port)]
    if ground_truth is not None:
        extra += ["--ground-truth", str(ground_truth)]
    return _start("zerohop.sim", [*args, *extra], env=env, startup_timeout_s=startup_timeout_s)


def start_proxy(
    upstream_url: str | Sequence[str],
    args: Sequence[str] = (),
    *,
    port: int = 0,
    env: Mapping[str, str] | None = None,
    startup_timeout_s: float = 30,
) -> SimProcess:
    """Run the layer proxy (`python -m zerohop.proxy`) in front of `upstream_url` (or of
    several upstreams, in that order: the layer's r0, r1, ...)."""
    urls = [upstream_url] if isinstance(upstream_url, str) else list(upstream_url)
    extra = [*(a for url in urls for a in ("--upstream", url)), "--port", str(port)]
    return _start(
        "zerohop.proxy", [*args, *extra], env=env, startup_timeout_s=startup_timeout_s
    )


def _start(
    module: str,
    args: Sequence[str],
    *,
    env: Mapping[str, str] | None,
    startup_timeout_s: float,
) -> SimProcess:
    workdir = Path(tempfile.mkdtemp(prefix="zerohop-sim-"))
    port_file = workdir / "port"
    stderr_path = workdir / "stderr.log"
    child_env = dict(os.environ)
    if env:
        child_env.update(env)
    child_env.setdefault("PYTHONUNBUFFERED", "1")
    command = [sys.executable, "-m", module, *args, "--port-file", str(port_file)]
    with stderr_path.open("wb") as stderr:
        proc = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            env=child_env,
            start_new_session=True,
            preexec_fn=_die_with_parent,
        )
    deadline = time.monotonic() + startup_timeout_s
    try:
        port = _wait_for_port(proc, port_file, deadline)
        _wait_for_health(proc, port, deadline)
    except BaseException as exc:
        _signal_group(proc, signal.SIGKILL)
        with contextlib.suppress(Exception):
            proc.wait(timeout=5)
        if isinstance(exc, SimStartError):
            raise SimStartError(f"{exc}\n--- {module} stderr ---\n{_tail(stderr_path)}") from None
        raise
    return SimProcess(proc, port, workdir)


def _die_with_parent() -> None:
    """Linux: the child gets SIGTERM when the process that started it dies (even by
    kill -9), so an embedded target never outlives its load generator."""
    if sys.platform.startswith("linux"):
        import ctypes

        pr_set_pdeathsig = 1
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(pr_set_pdeathsig, signal.SIGTERM)


def _wait_for_port(proc: subprocess.Popen[bytes], port_file: Path, deadline: float) -> int:
    while True:
        if port_file.exists():
            text = port_file.read_text().strip()
            if text.isdigit():
                return int(text)
        if proc.poll() is not None:
            raise SimStartError(f"the process exited with code {proc.returncode} before listening")
        if time.monotonic() > deadline:
            raise SimStartError("timed out waiting for the process to listen")
        time.sleep(0.02)


def _wait_for_health(proc: subprocess.Popen[bytes], port: int, deadline: float) -> None:
    while True:
        if proc.poll() is not None:
            raise SimStartError(f"the process exited with code {proc.returncode}")
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            conn.request("GET", "/health")
            status = conn.getresponse().status
            conn.close()
            if status == 200:
                return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise SimStartError("timed out waiting for GET /health to return 200")
        time.sleep(0.05)


def _signal_group(proc: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)


def _tail(path: Path, limit: int = STDERR_TAIL_BYTES) -> str:
    try:
        data = path.read_bytes()
    except OSError:
        return "(no stderr captured)"
    return data[-limit:].decode("utf-8", "replace")
