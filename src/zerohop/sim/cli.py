"""`zerohop sim` and `zerohop proxy`: the embedded target and the layer under test."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

import click

from zerohop.sim.config import ConfigError, load_config

EXIT_BAD_INPUT = 2


@click.command(name="sim", context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--gpu", default=None, help="GPU profile: h100-sxm, h200, a100-80gb, l4.")
@click.option("--model", default=None, help="Model profile, e.g. llama-3-8b, llama-3-70b.")
@click.option("--tp", type=int, default=None, help="Tensor-parallel GPUs.")
@click.option(
    "--served-model-name",
    "name",
    default=None,
    help="Name clients send as `model` (default: the model's HF id).",
)
@click.option("--host", default=None, help="Bind address (default 127.0.0.1).")
@click.option("--port", type=int, default=None, help="Port (0 = let the OS pick).")
@click.option(
    "--port-file",
    type=click.Path(path_type=Path),
    default=None,
    help="Write the bound port here once listening.",
)
@click.option("--seed", type=int, default=None)
@click.option(
    "--config",
    "config_path",
    type=click.Path(path_type=Path, exists=True),
    default=None,
    help="YAML config (models, LoRA, faults, engine knobs).",
)
@click.option(
    "--max-queue",
    type=int,
    default=None,
    help="Waiting requests per engine before 503 (OpenAI) / 529 (Anthropic).",
)
@click.option("--max-num-seqs", type=int, default=None)
@click.option("--max-num-batched-tokens", type=int, default=None)
@click.option("--num-gpu-blocks", type=int, default=None, help="Override KV-cache blocks.")
@click.option(
    "--time-scale",
    type=float,
    default=None,
    help="Multiply every modelled duration (2 = a GPU half as fast).",
)
@click.option(
    "--ground-truth",
    type=click.Path(path_type=Path),
    default=None,
    help="Append one JSON line per finished request here.",
)
@click.option(
    "--ground-truth-token-lags",
    is_flag=True,
    default=None,
    help="Include every token's emission lag in the ground truth.",
)
@click.option(
    "--api-key",
    envvar="ZEROHOP_SIM_API_KEY",
    default=None,
    help="Require this key (Bearer or x-api-key). Env: ZEROHOP_SIM_API_KEY.",
)
@click.option(
    "--layer",
    is_flag=True,
    default=False,
    help="Also run the layer proxy in its own process; --port is then the proxy's.",
)
@click.option("--layer-per-request-ms", type=float, default=0.0)
@click.option("--layer-cpu-ms", type=float, default=0.0)
@click.option("--layer-parse/--layer-no-parse", default=True)
@click.option("--layer-reserialise", is_flag=True, default=False)
@click.option("--layer-max-concurrency", type=int, default=0)
def sim_command(
    config_path: Path | None,
    port_file: Path | None,
    layer: bool,
    layer_per_request_ms: float,
    layer_cpu_ms: float,
    layer_parse: bool,
    layer_reserialise: bool,
    layer_max_concurrency: int,
    **flags: Any,
) -> None:
    """Run the simulated inference engine (vLLM + Anthropic APIs) on loopback."""
    overrides = dict(flags)
    overrides["ground_truth_token_lags"] = True if flags.get("ground_truth_token_lags") else None
    layer_port = overrides.pop("port", None)
    if layer:
        overrides["port"] = 0
    else:
        overrides["port"] = layer_port
    try:
        config = load_config(config_path, overrides)
    except ConfigError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(EXIT_BAD_INPUT)
    from zerohop.sim.app import serve

    if not layer:
        _run(serve(config, port_file))
        return
    proxy_args = [
        "--per-request-ms",
        str(layer_per_request_ms),
        "--cpu-ms",
        str(layer_cpu_ms),
        "--parse" if layer_parse else "--no-parse",
        "--max-concurrency",
        str(layer_max_concurrency),
    ]
    if layer_reserialise:
        proxy_args.append("--reserialise")
    _run(_serve_with_layer(config, port_file, layer_port or 0, proxy_args))


async def _serve_with_layer(
    config: Any, port_file: Path | None, proxy_port: int, proxy_args: list[str]
) -> None:
    from zerohop.sim.app import serve
    from zerohop.sim.launcher import start_proxy

    loop = asyncio.get_running_loop()
    ready: asyncio.Future[int] = loop.create_future()
    server = loop.create_task(serve(config, None, ready))
    sim_port = await ready
    proxy = await loop.run_in_executor(
        None,
        lambda: start_proxy(f"http://127.0.0.1:{sim_port}", proxy_args, port=proxy_port),
    )
    try:
        if port_file is not None:
            tmp = port_file.with_suffix(port_file.suffix + ".tmp")
            tmp.write_text(str(proxy.port))
            tmp.replace(port_file)
        print(f"zerohop-sim layer listening on {proxy.url} (engine on port {sim_port})", flush=True)
        await server
    finally:
        proxy.stop()


@click.command(name="proxy", context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--upstream", required=True, help="Engine URL, e.g. http://127.0.0.1:8000")
@click.option("--host", default="127.0.0.1")
@click.option("--port", type=int, default=8001)
@click.option("--port-file", type=click.Path(path_type=Path), default=None)
@click.option(
    "--per-request-ms",
    type=float,
    default=0.0,
    help="Async wait per request (a policy lookup, a remote call).",
)
@click.option(
    "--cpu-ms",
    type=float,
    default=0.0,
    help="Busy CPU work per request (blocks the proxy's loop, like Python code).",
)
@click.option("--parse/--no-parse", default=True, help="json-decode the request body.")
@click.option(
    "--reserialise",
    is_flag=True,
    default=False,
    help="Re-encode the body after the policy step (implies --parse).",
)
@click.option(
    "--max-concurrency",
    type=int,
    default=0,
    help="Requests forwarded at once; more wait in a queue (0 = unlimited).",
)
def proxy_command(
    upstream: str,
    host: str,
    port: int,
    port_file: Path | None,
    per_request_ms: float,
    cpu_ms: float,
    parse: bool,
    reserialise: bool,
    max_concurrency: int,
) -> None:
    """Run the orchestrator layer: a real extra HTTP hop in front of an engine."""
    from zerohop.layer.proxy import LayerConfig, serve_proxy

    try:
        layer = LayerConfig(
            upstream=upstream,
            host=host,
            port=port,
            per_request_ms=per_request_ms,
            cpu_ms=cpu_ms,
            parse=parse or reserialise,
            reserialise=reserialise,
            max_concurrency=max_concurrency,
        )
    except ValueError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(EXIT_BAD_INPUT)
    _run(serve_proxy(layer, port_file))


def _run(main: Coroutine[Any, Any, None]) -> None:
    """Run with uvloop when importable; SIGTERM/SIGINT end the run cleanly."""
    try:
        import uvloop

        runner: Any = uvloop.run
    except ImportError:  # pragma: no cover - uvloop is a dependency on Linux
        runner = asyncio.run

    async def guarded() -> None:
        task = asyncio.current_task()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, task.cancel if task else lambda: None)
        with contextlib.suppress(asyncio.CancelledError):
            await main

    runner(guarded())
