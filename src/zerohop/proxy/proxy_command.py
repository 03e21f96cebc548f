"""`zerohop proxy` (also `python -m zerohop.proxy`): the layer under test, an extra
HTTP hop in front of an engine."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from zerohop.core.exit_codes import EXIT_BAD_INPUT
from zerohop.proxy.proxy import LayerConfig, serve_proxy
from zerohop.proxy.routing import ROUTES
from zerohop.sim.serving.http_server import run_server


@click.command(name="proxy", context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--upstream", "upstreams", multiple=True, required=True,
              help="Engine URL, e.g. http://127.0.0.1:8000; repeat for several replicas.")
@click.option("--route", type=click.Choice(ROUTES), default="round_robin", show_default=True,
              help="With several upstreams: how each request picks one (see routing.py).")
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
@click.option("--delay-ms", type=float, default=0.0,
              help="An extra wait for --delay-percent % of requests (a tail-only cost).")
@click.option("--delay-percent", type=float, default=0.0,
              help="Share of requests (0-100, spread evenly) that wait --delay-ms.")
def proxy_command(
    upstreams: tuple[str, ...],
    route: str,
    host: str,
    port: int,
    port_file: Path | None,
    per_request_ms: float,
    cpu_ms: float,
    parse: bool,
    reserialise: bool,
    max_concurrency: int,
    delay_ms: float,
    delay_percent: float,
) -> None:
    """Run the orchestrator layer: a real extra HTTP hop in front of an engine."""
    try:
        layer = LayerConfig(
            upstreams=tuple(upstreams),
            route=route,
            host=host,
            port=port,
            per_request_ms=per_request_ms,
            cpu_ms=cpu_ms,
            parse=parse or reserialise,
            reserialise=reserialise,
            max_concurrency=max_concurrency,
            delay_ms=delay_ms,
            delay_percent=delay_percent,
        )
    except ValueError as exc:
        click.echo(f"zerohop: error: {exc}", err=True)
        sys.exit(EXIT_BAD_INPUT)
    run_server(serve_proxy(layer, port_file))
