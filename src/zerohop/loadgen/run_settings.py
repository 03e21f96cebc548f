"""`zerohop run`'s options, declared once: each a typed field whose metadata holds its flag,
its help and how it is given (repeatable, a yes/no flag, a choice).

The CLI is generated from this model (`zerohop.cli.run_options`); the Locust flags that
mean the same thing, for `locust -f loadtests/` run by hand, take their flag, help and
choices from it too (`loadgen.options`); and the Locust process that `zerohop run`
starts reads the run's settings from the plan written into the run folder (`plan.json`)
rather than from a second copy of the flags on its command line. It lives in `loadgen`,
the lowest layer that reads it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from zerohop.core.apis import API_NAMES, DEFAULT_API
from zerohop.layer.routing import ROUTES
from zerohop.workloads.kinds import KIND_CLASS_NAMES
from zerohop.workloads.local_tokenizer import TOKENIZER_HELP

CLASS_NAMES = tuple(KIND_CLASS_NAMES.values())
COMPARE_LAYER_MODES = ("interleaved", "sequential")
DEFAULT_DURATION = "30s"
REQUESTS_TIME_CAP = "24h"  # --requests without --duration: the count ends the run


@dataclass(frozen=True)
class Flag:
    """How one setting is given on the command line."""

    name: str  # "--tokenizer"
    help: str = ""
    kind: type = str  # the value's type: str, int, float, Path, or bool for a yes/no flag
    choices: tuple[str, ...] = ()
    repeatable: bool = False
    show_default: bool = False


def _setting(flag: Flag, default: Any = None) -> Any:
    if flag.repeatable:
        return field(default=(), metadata={"flag": flag})
    return field(default=default, metadata={"flag": flag})


@dataclass(frozen=True)
class RunSettings:
    """What `zerohop run` was asked, as given (before durations, SLOs and users are
    worked out into a `RunPlan`)."""

    host: str | None = _setting(Flag(
        "--host", "Target base URL (default: start the embedded target)."))
    api: str = _setting(Flag("--api", "Streaming API.", choices=API_NAMES, show_default=True),
                        DEFAULT_API)
    workloads: tuple[Path, ...] = _setting(Flag(
        "--workload", "Workload YAML file (repeatable). Default: all four shipped workloads.",
        kind=Path, repeatable=True))
    classes: tuple[str, ...] = _setting(Flag(
        "--only", "Run only these workload classes (repeatable).", choices=CLASS_NAMES,
        repeatable=True))
    users: int | None = _setting(Flag(
        "--users", "Concurrent Locust users, spread over the workloads by weight: overrides "
        "the files' closed-loop `users`. Default: each closed workload runs its file's "
        "`users`.", kind=int))
    rate: float | None = _setting(Flag(
        "--rate", "Total open-loop arrival rate, req/s (Poisson) instead of the files' load.",
        kind=float))
    max_concurrency: int | None = _setting(Flag(
        "--max-concurrency", "At most N open-loop requests (or sessions) in flight: an "
        "arrival that finds N waits for a slot before it is sent (its wait is recorded as "
        "queue_wait_ms; the latencies from schedule include it).", kind=int))
    requests: int | None = _setting(Flag(
        "--requests", "Stop after N requests in all (as `vllm bench serve --num-prompts`); "
        "the rates divide by the time the run really measured.", kind=int))
    duration: str | None = _setting(Flag(
        "--duration", f"Run time: 30s, 2m, 1h. [default: {DEFAULT_DURATION}; with "
        f"--requests, a cap of {REQUESTS_TIME_CAP}]"))
    telemetry: str = _setting(Flag(
        "--telemetry", "Sources: nvml, prom (the target's /metrics), prom=URL, loadgen; or "
        "none.", show_default=True), "prom,loadgen")
    slo: str = _setting(Flag("--slo", "e.g. ttft_p99_ms=500,tpot_p99_ms=50 (exit 1 if missed)."),
                        "")
    name: str = _setting(Flag("--name", "Run name (folder suffix).", show_default=True), "run")
    workers: int = _setting(Flag(
        "--workers", "Locust worker processes (distributed mode); 0 = one process.", kind=int,
        show_default=True), 0)
    results_dir: Path = _setting(Flag("--results-dir", kind=Path, show_default=True),
                                 Path("results"))
    model: str = _setting(Flag("--model", "Model to request (default: the target's first)."),
                          "")
    tokenizer: Path | None = _setting(Flag("--tokenizer", TOKENIZER_HELP, kind=Path))
    seed: int = _setting(Flag("--seed", kind=int, show_default=True), 1234)
    sim_args: str = _setting(Flag("--sim-args", "Extra arguments for the embedded target."), "")
    no_report: bool = _setting(Flag("--no-report", "Skip building report.html.", kind=bool),
                               False)
    microbench: str = _setting(Flag(
        "--microbench", "GPU microbenchmarks (auto: when a CUDA device exists).",
        choices=("auto", "on", "off"), show_default=True), "auto")
    compare_layer: bool = _setting(Flag(
        "--compare-layer", "Price the layer: one run whose requests go at random (with "
        "--seed) direct or through the layer, and report the layer's cost (1 user unless "
        "--users/--rate: the hop's own cost; under load, delayed arrivals also meet the "
        "engine mid-step, which adds to it).", kind=bool), False)
    compare_layer_mode: str = _setting(Flag(
        "--compare-layer-mode", "interleaved: both arms in one run; sequential: a run direct, "
        "then one through the layer (with each run's own noise beside the cost).",
        choices=COMPARE_LAYER_MODES, show_default=True), "interleaved")
    layer_urls: tuple[str, ...] = _setting(Flag(
        "--layer-url", "With --compare-layer and --host: a gateway's URL, or NAME=URL; "
        "repeat to price several in one run (docs/layers.md).", repeatable=True))
    control: bool = _setting(Flag(
        "--control", "With --compare-layer: add the arm `control`, zerohop's own proxy doing "
        "nothing (0 ms) in front of the direct target: the bare hop, priced beside.",
        kind=bool), False)
    layer_args: str = _setting(Flag(
        "--layer-args", "Embedded layer's options (with --compare-layer and no --layer-url).",
        show_default=True), "--per-request-ms 5")
    replicas: int = _setting(Flag(
        "--replicas", "With --compare-layer: embedded engine replicas, each its own process; "
        "the direct arm uses the first, the layer routes over all.", kind=int,
        show_default=True), 1)
    routes: tuple[str, ...] = _setting(Flag(
        "--route", "With --compare-layer: the embedded layer's routing policy; repeat to "
        "compare several, each an arm of the same run.", choices=ROUTES, repeatable=True))
    selfcheck: bool = _setting(Flag(
        "--selfcheck", "First certify the client at this load on this machine (as `zerohop "
        "selfcheck` does); the certificate goes into the run's folder and report.",
        kind=bool), False)
    selfcheck_duration: str = _setting(Flag(
        "--selfcheck-duration", "How long the self-check drives the load (with --selfcheck).",
        show_default=True), "20s")


def setting_fields() -> list[tuple[str, Flag, Any]]:
    """(field name, flag, default) for every setting, in the CLI's order."""
    return [(f.name, f.metadata["flag"], f.default) for f in dataclasses.fields(RunSettings)]


def flag_of(name: str) -> Flag:
    """The flag of the setting `name` (a field of `RunSettings`)."""
    flag: Flag = RunSettings.__dataclass_fields__[name].metadata["flag"]
    return flag


def settings_from(values: dict[str, Any]) -> RunSettings:
    """The model from a CLI's parsed values (repeatable ones as tuples); a value not
    given keeps its default."""
    names = {f.name for f in dataclasses.fields(RunSettings)}
    given = {k: tuple(v) if flag_of(k).repeatable else v
             for k, v in values.items() if k in names}
    return RunSettings(**given)
