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

from zerohop.core.apis import DEFAULT_API, api_names
from zerohop.core.percentile_choice import DEFAULT_PERCENTILES_TEXT, PERCENTILES_HELP
from zerohop.proxy.routing import ROUTES
from zerohop.workloads.benchmark_spec import DATASET_HELP, LENGTH_HELP
from zerohop.workloads.kind_registry import workload_kinds
from zerohop.workloads.local_tokenizer import TOKENIZER_HELP

CLASS_NAMES = tuple(kind.user_class for kind in workload_kinds())
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


def flag(name: str, help: str = "", **how: Any) -> dict[str, Flag]:
    """A field's metadata: its flag."""
    return {"flag": Flag(name, help, **how)}


@dataclass(frozen=True)
class RunSettings:
    """What `zerohop run` was asked, as given (before durations, SLOs and users are
    worked out into a `RunPlan`)."""

    host: str | None = field(default=None, metadata=flag(
        "--host", "Target base URL (default: start the embedded target)."))
    api: str = field(default=DEFAULT_API, metadata=flag(
        "--api", "Streaming API.", choices=api_names(), show_default=True))
    workloads: tuple[Path, ...] = field(default=(), metadata=flag(
        "--workload", "Workload YAML file (repeatable). Default: all four shipped workloads.",
        kind=Path, repeatable=True))
    classes: tuple[str, ...] = field(default=(), metadata=flag(
        "--only", "Run only these workload classes (repeatable).", choices=CLASS_NAMES,
        repeatable=True))
    users: int | None = field(default=None, metadata=flag(
        "--users", "Concurrent Locust users, spread over the workloads by weight: overrides "
        "the files' closed-loop `users`. Default: each closed workload runs its file's "
        "`users`.", kind=int))
    rate: float | None = field(default=None, metadata=flag(
        "--rate", "Total open-loop arrival rate, req/s (Poisson) instead of the files' load.",
        kind=float))
    max_concurrency: int | None = field(default=None, metadata=flag(
        "--max-concurrency", "At most N open-loop requests (or sessions) in flight: an "
        "arrival that finds N waits for a slot before it is sent (its wait is recorded as "
        "queue_wait_ms; the latencies from schedule include it).", kind=int))
    requests: int | None = field(default=None, metadata=flag(
        "--requests", "Stop after N requests in all (as `vllm bench serve --num-prompts`); "
        "the rates divide by the time the run really measured.", kind=int))
    input_tokens: str | None = field(default=None, metadata=flag(
        "--input-tokens", LENGTH_HELP.format(what="Prompt length")))
    output_tokens: str | None = field(default=None, metadata=flag(
        "--output-tokens", LENGTH_HELP.format(what="Answer length (held with ignore_eos where "
                                             "the API has it)")))
    dataset: str | None = field(default=None, metadata=flag("--dataset", DATASET_HELP))
    duration: str | None = field(default=None, metadata=flag(
        "--duration", f"Run time: 30s, 2m, 1h. [default: {DEFAULT_DURATION}; with "
        f"--requests, a cap of {REQUESTS_TIME_CAP}]"))
    telemetry: str = field(default="prom,loadgen", metadata=flag(
        "--telemetry", "Sources: nvml, prom (the target's /metrics), prom=URL, loadgen; or "
        "none.", show_default=True))
    slo: str = field(default="", metadata=flag(
        "--slo", "e.g. ttft_p99_ms=500,tpot_p99_ms=50 (exit 1 if missed)."))
    percentiles: str = field(default=DEFAULT_PERCENTILES_TEXT, metadata=flag(
        "--percentiles", PERCENTILES_HELP, show_default=True))
    name: str = field(default="run", metadata=flag(
        "--name", "Run name (folder suffix).", show_default=True))
    workers: int = field(default=0, metadata=flag(
        "--workers", "Locust worker processes (distributed mode); 0 = one process.", kind=int,
        show_default=True))
    results_dir: Path = field(default=Path("results"), metadata=flag(
        "--results-dir", "Folder that receives one results folder per run.", kind=Path,
        show_default=True))
    model: str = field(default="", metadata=flag(
        "--model", "Model to request (default: the target's first)."))
    tokenizer: Path | None = field(default=None, metadata=flag(
        "--tokenizer", TOKENIZER_HELP, kind=Path))
    seed: int = field(default=1234, metadata=flag(
        "--seed", "Seed for prompts, lengths and arrivals (one stream per worker).", kind=int,
        show_default=True))
    sim_args: str = field(default="", metadata=flag(
        "--sim-args", "Extra arguments for the embedded target."))
    no_report: bool = field(default=False, metadata=flag(
        "--no-report", "Skip building report.html.", kind=bool))
    microbench: str = field(default="auto", metadata=flag(
        "--microbench", "GPU microbenchmarks (auto: when a CUDA device exists).",
        choices=("auto", "on", "off"), show_default=True))
    compare_layer: bool = field(default=False, metadata=flag(
        "--compare-layer", "Price the layer: one run whose requests go at random (with "
        "--seed) direct or through the layer, and report the layer's cost (1 user unless "
        "--users/--rate: the hop's own cost; under load, delayed arrivals also meet the "
        "engine mid-step, which adds to it).", kind=bool))
    compare_layer_mode: str = field(default="interleaved", metadata=flag(
        "--compare-layer-mode", "interleaved: both arms in one run; sequential: a run direct, "
        "then one through the layer (with each run's own noise beside the cost).",
        choices=COMPARE_LAYER_MODES, show_default=True))
    layer_urls: tuple[str, ...] = field(default=(), metadata=flag(
        "--layer-url", "With --compare-layer and --host: a gateway's URL, or NAME=URL; "
        "repeat to price several in one run (docs/layers.md).", repeatable=True))
    control: bool = field(default=False, metadata=flag(
        "--control", "With --compare-layer: add the arm `control`, zerohop's own proxy doing "
        "nothing (0 ms) in front of the direct target: the bare hop, priced beside.",
        kind=bool))
    layer_args: str = field(default="--per-request-ms 5", metadata=flag(
        "--layer-args", "Embedded layer's options (with --compare-layer and no --layer-url).",
        show_default=True))
    replicas: int = field(default=1, metadata=flag(
        "--replicas", "With --compare-layer: embedded engine replicas, each its own process; "
        "the direct arm uses the first, the layer routes over all.", kind=int,
        show_default=True))
    routes: tuple[str, ...] = field(default=(), metadata=flag(
        "--route", "With --compare-layer: the embedded layer's routing policy; repeat to "
        "compare several, each an arm of the same run.", choices=ROUTES, repeatable=True))
    probe_rate: float = field(default=0.0, metadata=flag(
        "--probe-rate", "Interference probe: also send small fixed requests at R req/s "
        "(Poisson, open loop), alone for --probe-idle first, then beside the load; reported "
        "apart (idle vs under load), never in the workloads' figures. 0 = none.", kind=float))
    probe_prompt_tokens: int = field(default=16, metadata=flag(
        "--probe-prompt-tokens", "The probe's prompt, in tokens (about).", kind=int,
        show_default=True))
    probe_output_tokens: int = field(default=4, metadata=flag(
        "--probe-output-tokens", "The probe's answer, in tokens.", kind=int,
        show_default=True))
    probe_idle: str = field(default="5s", metadata=flag(
        "--probe-idle", "How long the probe runs alone before the load (its idle baseline); "
        "added to the run's time.", show_default=True))
    answer_probe: bool = field(default=False, metadata=flag(
        "--answer-probe", "Answers under load: send a fixed set of prompts at temperature 0 "
        "(fixed seed, logprobs asked) once alone before the load and once beside it; report "
        "which answers changed and where (openai-chat, openai-completions).", kind=bool))
    selfcheck: bool = field(default=False, metadata=flag(
        "--selfcheck", "First certify the client at this load on this machine (as `zerohop "
        "selfcheck` does); the certificate goes into the run's folder and report.",
        kind=bool))
    selfcheck_duration: str = field(default="20s", metadata=flag(
        "--selfcheck-duration", "How long the self-check drives the load (with --selfcheck).",
        show_default=True))
    stop_when_saturated: bool = field(default=False, metadata=flag(
        "--stop-when-saturated", "End the load once the live saturation verdict says the "
        "target fell behind it (docs/saturation.md): the run then finishes as usual, its "
        "figures over the time the load ran.", kind=bool))


def setting_fields() -> list[tuple[str, Flag, Any]]:
    """(field name, flag, default) for every setting, in the CLI's order."""
    return [(f.name, f.metadata["flag"], f.default) for f in dataclasses.fields(RunSettings)]


def flag_of(name: str) -> Flag:
    """The flag of the setting `name` (a field of `RunSettings`)."""
    flag: Flag = RunSettings.__dataclass_fields__[name].metadata["flag"]
    return flag

