"""Find (or build) llama.cpp's `llama-server`, write the tiny GGUF it serves, start and
stop it on a free loopback port.

Why: a second real engine beside vLLM, with its own shapes (/tokenize, usage, `timings`,
errors, `llamacpp:` metric names), which zerohop must read without being told which
engine it faces. The server is one native binary that tools/llamacpp/build_server.sh
builds from the llama.cpp sources PyPI's llama-cpp-python sdist carries (minutes, once,
cached); the model is written by tools/llamacpp/build_tiny_gguf.py with this python,
which needs PyPI's `gguf` (the project's `llamacpp` extra). This module is stdlib-only
and pytest-free, like tests/vllm_cpu.py, whose process handling it reuses.

Typical use (what tests/llamacpp/conftest.py does):

    probe = probe_server(build=False)
    model = build_tiny_gguf(default_model_path())
    with start_llama_server(probe.binary, model) as server:
        ...  # server.url, server.model_name
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tests.vllm_cpu import VllmServer, free_loopback_port, health_ok, output_tail

LLAMA_CPP_PYTHON_VERSION = "0.3.36"
SERVED_MODEL_NAME = "tiny"
BUILD_TIMEOUT_S = 1800.0
MODEL_TIMEOUT_S = 300.0
DEFAULT_SLOTS = 4
# per slot: the tiny GGUF's context, room for the default long_context workload
DEFAULT_SLOT_CONTEXT = 16384


@dataclass(frozen=True)
class ServerProbe:
    """The outcome of looking for llama-server: `ready`, or `reason` why not."""

    binary: Path
    ready: bool
    reason: str


class LlamaStartError(RuntimeError):
    """llama-server died or never became healthy; the message carries its log tail."""


class LlamaServer(VllmServer):
    """A running llama-server; a context manager that stops it on exit. One process in a
    group of its own, stopped as vLLM's server is (SIGTERM, then SIGKILL after a grace)."""

    def __repr__(self) -> str:
        return f"LlamaServer(url={self.url!r}, pid={self.pid})"


def cache_root() -> Path:
    """`$ZEROHOP_CACHE`, else ~/.cache/zerohop (what build_server.sh uses)."""
    override = os.environ.get("ZEROHOP_CACHE")
    return Path(override).expanduser() if override else Path.home() / ".cache" / "zerohop"


def default_server_path() -> Path:
    """`$ZEROHOP_LLAMA_SERVER`, else where build_server.sh puts it."""
    override = os.environ.get("ZEROHOP_LLAMA_SERVER")
    if override:
        return Path(override).expanduser()
    return cache_root() / f"llama.cpp-{LLAMA_CPP_PYTHON_VERSION}" / "bin" / "llama-server"


def default_model_path() -> Path:
    return cache_root() / "tiny-gguf" / "tiny.gguf"


def tools_dir() -> Path:
    """tools/llamacpp of this checkout: this module lives in its tests/, never in a wheel."""
    return Path(__file__).resolve().parents[1] / "tools" / "llamacpp"


def probe_server(*, build: bool, binary: Path | None = None) -> ServerProbe:
    """llama-server when it runs (`--version`), built first when `build` (minutes), or
    why there is none (for a skip message)."""
    path = binary if binary is not None else default_server_path()
    reason = _runs(path)
    if not reason:
        return ServerProbe(binary=path, ready=True, reason="")
    if not build:
        return ServerProbe(binary=path, ready=False, reason=reason)
    script = tools_dir() / "build_server.sh"
    try:
        done = subprocess.run(["bash", str(script)], capture_output=True, text=True,
                              timeout=BUILD_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        return ServerProbe(binary=path, ready=False,
                           reason=f"{script} ran over {BUILD_TIMEOUT_S:.0f} s")
    if done.returncode != 0:
        return ServerProbe(binary=path, ready=False, reason=(
            f"{script} failed with exit code {done.returncode}:\n"
            f"{output_tail(done.stdout + done.stderr)}"))
    reason = _runs(path)
    return ServerProbe(binary=path, ready=not reason, reason=reason)


def gguf_missing() -> str:
    """Why this python cannot write the model ("" when it can)."""
    if importlib.util.find_spec("gguf") is None:
        return "PyPI's gguf is not installed (pip install -e '.[llamacpp]')"
    return ""


def build_tiny_gguf(out: Path, *, vocab_size: int | None = None) -> Path:
    """Write (or reuse) the tiny GGUF at `out` with this python; returns `out`."""
    script = tools_dir() / "build_tiny_gguf.py"
    vocab = [] if vocab_size is None else ["--vocab-size", str(vocab_size)]
    try:
        done = subprocess.run([sys.executable, str(script), str(out), *vocab],
                              capture_output=True, text=True, timeout=MODEL_TIMEOUT_S,
                              check=False)
    except subprocess.TimeoutExpired as exc:
        raise RuntimeError(f"writing the tiny GGUF ran over {MODEL_TIMEOUT_S} s") from exc
    if done.returncode != 0:
        raise RuntimeError(f"writing the tiny GGUF failed (exit code {done.returncode}):\n"
                           f"{output_tail(done.stdout + done.stderr)}")
    return out


def start_llama_server(
    binary: Path,
    model: Path,
    *,
    port: int = 0,
    slots: int = DEFAULT_SLOTS,
    slot_context: int = DEFAULT_SLOT_CONTEXT,
    threads: int = 1,
    cpus: Sequence[int] | None = None,
    extra_args: Sequence[str] = (),
    startup_timeout_s: float = 120.0,
    log_path: Path | None = None,
) -> LlamaServer:
    """Start llama-server serving `model` as `tiny` (`slots` requests at once, each with
    `slot_context` tokens, /metrics on) and wait until GET /health answers 200.

    `cpus`: confine it to these CPUs (set in the child before it starts, so every thread
    it makes inherits them), so a load generator on the others does not share its core.
    """
    chosen_port = port or free_loopback_port()
    command = [
        str(binary), "--model", str(model), "--alias", SERVED_MODEL_NAME,
        "--host", "127.0.0.1", "--port", str(chosen_port),
        "--ctx-size", str(slots * slot_context), "--parallel", str(slots),
        "--threads", str(threads), "--metrics", "--no-webui",
        *extra_args,
    ]  # fmt: skip
    if log_path is None:
        handle, name = tempfile.mkstemp(prefix="zerohop-llama-", suffix=".log")
        os.close(handle)
        log_path = Path(name)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    chosen_cpus = set(cpus) if cpus else None

    def confine() -> None:
        if chosen_cpus:
            os.sched_setaffinity(0, chosen_cpus)

    with log_path.open("wb") as log_file:
        process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log_file,
                                   stderr=subprocess.STDOUT, start_new_session=True,
                                   preexec_fn=confine)
    server = LlamaServer(process=process, port=chosen_port, adapter_names=[],
                         log_path=log_path, cpus=sorted(cpus) if cpus else None)
    try:
        _wait_until_healthy(server, startup_timeout_s)
    except BaseException:
        server.stop()
        raise
    return server


def _wait_until_healthy(server: LlamaServer, timeout_s: float) -> None:
    started = time.monotonic()
    while True:
        exit_code = server.process.poll()
        if exit_code is not None:
            raise LlamaStartError(f"llama-server exited with code {exit_code} during startup "
                                  f"(log {server.log_path}):\n{server.log_tail()}")
        if health_ok(server.url):  # 503 while the model loads
            server.startup_s = time.monotonic() - started
            return
        if time.monotonic() - started > timeout_s:
            raise LlamaStartError(f"llama-server not healthy after {timeout_s:.0f} s "
                                  f"(log {server.log_path}):\n{server.log_tail()}")
        time.sleep(0.1)


def _runs(binary: Path) -> str:
    """"" when `binary --version` succeeds, else why not."""
    if not binary.is_file():
        return f"no llama-server at {binary}: run tools/llamacpp/build_server.sh"
    try:
        done = subprocess.run([str(binary), "--version"], capture_output=True, text=True,
                              timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{binary} --version failed: {exc!r}"
    if done.returncode != 0:
        return f"{binary} --version exited {done.returncode}: {output_tail(done.stderr, 5)}"
    return ""
