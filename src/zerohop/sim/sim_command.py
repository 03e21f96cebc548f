"""`zerohop sim`: the embedded target (with `--layer`, the layer proxy in front of it,
started as its own process)."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

import click

from zerohop.core.exit_codes import EXIT_BAD_INPUT
from zerohop.sim.config import ConfigError, load_config
from zerohop.sim.serving.http_server import run_server


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
    "--prefix-caching/--no-prefix-caching",
    "enable_prefix_caching",
    default=None,
    help="Reuse the KV cache of repeated prompt prefixes (default on, like vLLM V1).",
)
@click.option(
    "--reasoning-share",
    type=float,
    default=None,
    help="Share of chat/messages requests that think before answering (0-1).",
)
@click.option(
    "--reasoning-tokens", type=int, default=None, help="Median thinking length in tokens."
)
@click.option(
    "--tool-call-probability",
    type=float,
    default=None,
    help="Chance that a request offering `tools` is answered with a tool call (0-1).",
)
@click.option(
    "--invalid-json-share",
    type=float,
    default=None,
    help="Share of structured-output (JSON schema) requests answered with text that is "
    "not JSON (0-1).",
)
@click.option(
    "--answer-divergence",
    type=float,
    default=None,
    help="Share of seeded temperature-0 chat/completions answers that, decoded beside "
    "other sequences, change one token at a drawn position (0-1; modelled, for the "
    "answer probe).",
)
@click.option(
    "--spec-draft-tokens",
    type=int,
    default=None,
    help="Speculative decoding with a modelled draft: tokens proposed per decode step "
    "(default 0: off).",
)
@click.option(
    "--spec-acceptance",
    type=float,
    default=None,
    help="Chance each draft token is accepted given the ones before it were (0-1, "
    "default 0.7).",
)
@click.option(
    "--pd-role",
    type=click.Choice(["prefill", "decode"]),
    default=None,
    help="Prefill/decode disaggregation: serve as a prefill or a decode instance behind "
    "a PD router (requests without kv_transfer_params are served as by a plain instance).",
)
@click.option(
    "--kv-bandwidth-gbps",
    type=float,
    default=None,
    help="PD decode: the modelled KV link's bandwidth, GB/s (default 50).",
)
@click.option(
    "--kv-latency-ms",
    type=float,
    default=None,
    help="PD decode: the modelled KV pull's fixed latency, ms (default 0.5).",
)
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
    "--ground-truth-keep",
    type=int,
    default=None,
    help="Keep the last N ground-truth records in memory (default 20000; the file keeps "
    "all): a long run's target memory stays bounded by it.",
)
@click.option(
    "--api-key",
    envvar="ZEROHOP_SIM_API_KEY",
    default=None,
    help="Require this key (Bearer or x-api-key). Env: ZEROHOP_SIM_API_KEY.",
)
@click.option(
    "--realtime",
    is_flag=True,
    default=False,
    help="Run the engine loop at real-time priority (Linux SCHED_FIFO; root or "
    "CAP_SYS_NICE): on cores it shares with the load generator, its steps go first.",
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
    realtime: bool,
    **flags: Any,
) -> None:
    """Run the simulated inference engine (vLLM + Anthropic APIs) on loopback."""
    if realtime:
        _run_at_realtime_priority()
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
        click.echo(f"zerohop: error: {exc}", err=True)
        sys.exit(EXIT_BAD_INPUT)
    from zerohop.sim.serving.app import serve

    if not layer:
        run_server(serve(config, port_file))
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
    run_server(_serve_with_layer(config, port_file, layer_port or 0, proxy_args))


REALTIME_PRIORITY = 10  # above ordinary processes, below the kernel's own real-time threads


def _run_at_realtime_priority() -> None:
    """SCHED_FIFO for this thread, the engine loop's (children started later, such as
    the layer proxy, do not inherit it). A step's writes are then not preempted by a
    load generator on the same core: at 2,000 streams over two replicas sharing both
    cores with the client, emission lag p99 went from 1.3-1.7x to 0.8-1.14x the floor's
    time for one step's writes (tests/bench/bench_sim_emission.py --sim-realtime).
    The kernel's real-time throttling keeps 5 % of each core for everything else."""
    policy = getattr(os, "SCHED_FIFO", None)
    if policy is None:
        click.echo("zerohop: error: --realtime: this OS has no SCHED_FIFO", err=True)
        sys.exit(EXIT_BAD_INPUT)
    try:
        os.sched_setscheduler(0, policy | os.SCHED_RESET_ON_FORK,
                              os.sched_param(REALTIME_PRIORITY))
    except OSError as exc:
        click.echo(f"zerohop: error: --realtime: not permitted here ({exc.strerror}; needs "
                   "root or CAP_SYS_NICE)", err=True)
        sys.exit(EXIT_BAD_INPUT)


async def _serve_with_layer(
    config: Any, port_file: Path | None, proxy_port: int, proxy_args: list[str]
) -> None:
    from zerohop.sim.launcher import start_proxy
    from zerohop.sim.serving.app import serve

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
