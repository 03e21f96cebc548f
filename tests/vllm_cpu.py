"""Build, start and stop a real vLLM CPU engine serving a tiny local model.

Why: zerohop's end-to-end tier needs a real continuous-batching engine (queueing, KV
cache, streaming, multi-LoRA, the real /metrics names), not only the embedded target.
vLLM lives in its own venv (tools/vllm_cpu/setup_env.sh): it pins torch, transformers
and much more, so this module is stdlib-only and drives that venv's python through
subprocesses. Nothing here imports vllm. It lives in tests/, pytest-free: the vllm tier's
fixtures, the benches and tools/vllm_cpu/serve.py share it, and it drives the checkout's
tools/vllm_cpu scripts, so no wheel ships it.

Typical use (what tests/vllm/conftest.py does):

    env = probe_env(setup=False).env
    model_dir = build_tiny_model(env, default_model_dir())
    with start_vllm(env, model_dir, lora_adapters=adapters_in(model_dir)) as server:
        ...  # server.url, server.model_name, server.adapter_names
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

VLLM_CPU_VERSION = "0.32.0"
SERVED_MODEL_NAME = "tiny"
# Written by setup_env.sh only after `import vllm` succeeded in the venv; it names the
# installed set, starting with vllm-cpu (setup_env.sh itself checks the full pins).
READY_MARKER_NAME = ".zerohop-vllm-ready"
READY_MARKER_PREFIX = f"vllm-cpu=={VLLM_CPU_VERSION} "
SETUP_TIMEOUT_S = 1200.0
BUILD_TIMEOUT_S = 600.0
STOP_GRACE_S = 15.0
LOG_TAIL_LINES = 40


@dataclass(frozen=True)
class VllmCpuEnv:
    """A ready vLLM CPU venv: `python` runs `-m vllm.entrypoints.openai.api_server`."""

    venv: Path
    python: Path


@dataclass(frozen=True)
class EnvProbe:
    """The outcome of looking for the venv: `env`, or `reason` why there is none."""

    venv: Path
    env: VllmCpuEnv | None
    reason: str


class VllmStartError(RuntimeError):
    """vLLM died or never became healthy; the message carries its log tail."""


def probe_env(*, setup: bool = True, venv: Path | None = None) -> EnvProbe:
    """The ready venv, set up first when `setup` (minutes, ~3.5 GB), or why there is none
    (`reason`, for a skip message)."""
    venv_dir = venv if venv is not None else default_venv_dir()
    found = _ready_env(venv_dir)
    if found is not None:
        return EnvProbe(venv=venv_dir, env=found, reason="")
    if not setup:
        return EnvProbe(
            venv=venv_dir,
            env=None,
            reason=f"no ready marker {venv_dir / READY_MARKER_NAME}",
        )
    script = tools_dir() / "setup_env.sh"
    if not script.is_file():
        return EnvProbe(venv=venv_dir, env=None, reason=f"setup script not found: {script}")
    try:
        completed = subprocess.run(
            ["bash", str(script), str(venv_dir)],
            capture_output=True,
            text=True,
            timeout=SETUP_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return EnvProbe(venv=venv_dir, env=None, reason=f"{script} ran over {SETUP_TIMEOUT_S} s")
    if completed.returncode != 0:
        tail = output_tail(completed.stdout + completed.stderr)
        return EnvProbe(
            venv=venv_dir,
            env=None,
            reason=f"{script} failed with exit code {completed.returncode}:\n{tail}",
        )
    found = _ready_env(venv_dir)
    if found is None:
        return EnvProbe(venv=venv_dir, env=None, reason=f"{script} left no ready marker")
    return EnvProbe(venv=venv_dir, env=found, reason="")


def default_venv_dir() -> Path:
    """`$ZEROHOP_VLLM_VENV`, else a per-user cache that survives between CI runs."""
    override = os.environ.get("ZEROHOP_VLLM_VENV")
    if override:
        return Path(override).expanduser()
    return Path.home() / ".cache" / "zerohop" / f"vllm-cpu-{VLLM_CPU_VERSION}"


def default_model_dir() -> Path:
    """`${ZEROHOP_VLLM_CACHE:-~/.cache/zerohop}/tiny-model`."""
    cache = os.environ.get("ZEROHOP_VLLM_CACHE")
    base = Path(cache).expanduser() if cache else Path.home() / ".cache" / "zerohop"
    return base / "tiny-model"


def tools_dir() -> Path:
    """tools/vllm_cpu of this checkout: this module lives in its tests/, never in a wheel."""
    return Path(__file__).resolve().parents[1] / "tools" / "vllm_cpu"


def build_tiny_model(env: VllmCpuEnv, out_dir: Path, *, vocab_size: int | None = None) -> Path:
    """Build (or reuse) the tiny model + adapters in `out_dir`; returns `out_dir`.
    `vocab_size`: its tokenizer's and vocabulary's size (default: the builder's 512)."""
    script = tools_dir() / "build_tiny_model.py"
    if not script.is_file():
        raise FileNotFoundError(f"model builder not found: {script}")
    vocab = [] if vocab_size is None else ["--vocab-size", str(vocab_size)]
    try:
        completed = subprocess.run(
            [str(env.python), str(script), str(out_dir), *vocab],
            capture_output=True,
            text=True,
            timeout=BUILD_TIMEOUT_S,
            env=_child_environment(None),
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise RuntimeError(f"building the tiny model ran over {BUILD_TIMEOUT_S} s") from exc
    if completed.returncode != 0:
        tail = output_tail(completed.stdout + completed.stderr)
        raise RuntimeError(
            f"building the tiny model failed (exit code {completed.returncode}):\n{tail}"
        )
    return out_dir


def adapters_in(model_dir: Path) -> dict[str, Path]:
    """The LoRA adapters the builder wrote under `model_dir/adapters`, by name."""
    adapters_dir = model_dir / "adapters"
    if not adapters_dir.is_dir():
        return {}
    return {
        path.name: path
        for path in sorted(adapters_dir.iterdir())
        if (path / "adapter_config.json").is_file()
    }


def start_vllm(
    env: VllmCpuEnv,
    model_dir: Path,
    *,
    port: int = 0,
    lora_adapters: Mapping[str, Path] | None = None,
    max_loras: int = 2,
    extra_args: Sequence[str] = (),
    startup_timeout_s: float = 240.0,
    log_path: Path | None = None,
    extra_env: Mapping[str, str] | None = None,
    cpus: Sequence[int] | None = None,
) -> VllmServer:
    """Start vLLM's OpenAI/Anthropic server and wait until GET /health answers 200.

    Runs in its own process group (vLLM forks an engine-core process) so `stop()` ends
    all of it. `port=0` picks a free loopback port. Raises VllmStartError with the log
    tail when the server dies or is not healthy in `startup_timeout_s`.

    `cpus`: confine the whole server (API server, engine core, its OpenMP threads) to
    these CPUs, so a load generator on the others does not share a core with it (why:
    docs/nightly-and-capacity.md, "Measure a curve that repeats").
    """
    chosen_port = port or free_loopback_port()
    adapters = dict(lora_adapters or {})
    command = _server_command(env, model_dir, chosen_port, adapters, max_loras, extra_args)
    if log_path is None:
        handle, name = tempfile.mkstemp(prefix="zerohop-vllm-", suffix=".log")
        os.close(handle)
        log_path = Path(name)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    environment = _child_environment(extra_env)
    if cpus:
        environment["VLLM_CPU_OMP_THREADS_BIND"] = ",".join(str(c) for c in cpus)
        environment["VLLM_CPU_NUM_OF_RESERVED_CPU"] = "0"
    with log_path.open("wb") as log_file:
        process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            env=environment,
            start_new_session=True,
        )
    server = VllmServer(
        process=process,
        port=chosen_port,
        adapter_names=list(adapters),
        log_path=log_path,
        cpus=sorted(cpus) if cpus else None,
    )
    try:
        if cpus:  # before vLLM forks its engine core (seconds of imports away): all inherit
            os.sched_setaffinity(process.pid, set(cpus))
        _wait_until_healthy(server, startup_timeout_s)
    except BaseException:
        server.stop()
        raise
    return server


class VllmServer:
    """A running vLLM server; a context manager that stops it on exit."""

    model_name: str = SERVED_MODEL_NAME

    def __init__(
        self,
        *,
        process: subprocess.Popen[bytes],
        port: int,
        adapter_names: list[str],
        log_path: Path,
        cpus: list[int] | None = None,
    ) -> None:
        self.process = process
        self.port = port
        self.pid = process.pid
        self.url = f"http://127.0.0.1:{port}"
        self.adapter_names = adapter_names
        self.log_path = log_path
        self.cpus = cpus  # None: vLLM's own CPU binding
        self.startup_s: float | None = None
        # Last resort if the owner forgets stop(): never leave an engine running.
        self._finalizer = weakref.finalize(self, _kill_group, process.pid, signal.SIGKILL)

    def stop(self) -> None:
        """SIGTERM the whole process group, SIGKILL what is left after a grace period."""
        if not self._finalizer.alive:
            return
        _kill_group(self.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            _kill_group(self.pid, signal.SIGKILL)
            self.process.wait(timeout=STOP_GRACE_S)
        # The engine-core child may outlive the API server by a moment; end it too.
        self._finalizer()

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError as exc:
            return f"(log {self.log_path} unreadable: {exc})"
        return output_tail(text, lines)

    def __enter__(self) -> VllmServer:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"VllmServer(url={self.url!r}, pid={self.pid}, adapters={self.adapter_names})"


def _server_command(
    env: VllmCpuEnv,
    model_dir: Path,
    port: int,
    adapters: Mapping[str, Path],
    max_loras: int,
    extra_args: Sequence[str],
) -> list[str]:
    # `python -m`: the `vllm` console script fails, its package metadata says vllm-cpu.
    command = [
        str(env.python), "-m", "vllm.entrypoints.openai.api_server",
        "--model", str(model_dir),
        "--served-model-name", SERVED_MODEL_NAME,
        "--host", "127.0.0.1",
        "--port", str(port),
        "--dtype", "bfloat16",
        "--max-model-len", "4096",
    ]  # fmt: skip
    if adapters:
        command += [
            "--enable-lora",
            "--max-loras", str(max_loras),
            "--max-lora-rank", "8",
            "--lora-modules",
            *(f"{name}={path}" for name, path in adapters.items()),
        ]  # fmt: skip
    command += list(extra_args)
    return command


def _child_environment(extra_env: Mapping[str, str] | None) -> dict[str, str]:
    environment = {
        key: value
        for key, value in os.environ.items()
        # The caller's venv must not leak into the vLLM venv's interpreter.
        if key not in {"PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV"}
    }
    environment.update(
        {
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "VLLM_CPU_KVCACHE_SPACE": environment.get("VLLM_CPU_KVCACHE_SPACE", "1"),
            "VLLM_NO_USAGE_STATS": "1",
            "DO_NOT_TRACK": "1",
        }
    )
    environment.update(extra_env or {})
    return environment


def _wait_until_healthy(server: VllmServer, timeout_s: float) -> None:
    started = time.monotonic()
    deadline = started + timeout_s
    while True:
        exit_code = server.process.poll()
        if exit_code is not None:
            raise VllmStartError(
                f"vLLM exited with code {exit_code} during startup "
                f"(log {server.log_path}):\n{server.log_tail()}"
            )
        if health_ok(server.url):
            server.startup_s = time.monotonic() - started
            return
        if time.monotonic() > deadline:
            raise VllmStartError(
                f"vLLM not healthy after {timeout_s:.0f} s "
                f"(log {server.log_path}):\n{server.log_tail()}"
            )
        time.sleep(0.5)


def health_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=2.0) as response:
            return bool(response.status == 200)
    except (OSError, urllib.error.URLError):
        return False


def free_loopback_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _ready_env(venv_dir: Path) -> VllmCpuEnv | None:
    python = venv_dir / "bin" / "python"
    marker = venv_dir / READY_MARKER_NAME
    try:
        ready = marker.read_text().startswith(READY_MARKER_PREFIX)
    except OSError:
        return None
    if not ready or not python.exists():
        return None
    return VllmCpuEnv(venv=venv_dir, python=python)


def _kill_group(process_group: int, signal_number: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process_group, signal_number)


def output_tail(text: str, lines: int = LOG_TAIL_LINES) -> str:
    return "\n".join(text.rstrip().splitlines()[-lines:])
