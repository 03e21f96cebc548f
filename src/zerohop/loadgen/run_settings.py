"""`zerohop run`'s options, declared once: each a typed field whose metadata holds its flag,
its help and how it is given (repeatable, a yes/no flag, a choice).

The CLI is generated from this model (`zerohop.cli.run_options`); the Locust flags that
mean the same thing, for `locust -f loadtests/` run by hand, take their flag, help and
choices from it too (`loadgen.options`); and the Locust process that `zerohop run`
starts reads the run's settings from the plan written into the run folder (`plan.json`)
rather than from a second copy of the flags on its command line, as this same type
(`loadgen.options.run_settings`). Each field's checks live in its flag (`above`,
`at_least`, `duration`) and the checks across fields in `RunSettings.check`, so a new
setting is one field here. It lives in `loadgen`, the lowest layer that reads it.
"""

from __future__ import annotations

import dataclasses
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from zerohop.core.apis import DEFAULT_API, api_names
from zerohop.core.percentile_choice import DEFAULT_PERCENTILES_TEXT, PERCENTILES_HELP
from zerohop.core.slo import parse_slo_text
from zerohop.proxy.routing import ROUTES
from zerohop.workloads.benchmark_spec import DATASET_HELP, LENGTH_HELP
from zerohop.workloads.content.local_tokenizer import TOKENIZER_HELP
from zerohop.workloads.kind_registry import workload_kinds

CLASS_NAMES = tuple(kind.user_class for kind in workload_kinds())
COMPARE_LAYER_MODES = ("interleaved", "sequential")
DEFAULT_DURATION = "30s"
REQUESTS_TIME_CAP = "24h"  # --requests without --duration: the count ends the run
DEFAULT_SEED = 1234  # prompts, lengths and arrivals: every command that takes --seed


@dataclass(frozen=True)
class Flag:
    """How one setting is given on the command line."""

    name: str  # "--tokenizer"
    help: str = ""
    kind: type = str  # the value's type: str, int, float, Path, or bool for a yes/no flag
    choices: tuple[str, ...] = ()
    repeatable: bool = False
    show_default: bool = False
    locust: bool = False  # also one of Locust's flags, for `locust -f loadtests/` by hand
    in_web_ui: bool = True  # with `locust`: a field of Locust's web UI's start form too
    above: float | None = None  # a number given must be > this
    at_least: float | None = None  # a number given must be >= this
    duration: bool = False  # text like 30s, 2m or 1h30m


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
        "--api", "Streaming API.", choices=api_names(), show_default=True, locust=True))
    workloads: tuple[Path, ...] = field(default=(), metadata=flag(
        "--workload", "Workload YAML file (repeatable). Default: all four shipped workloads.",
        kind=Path, repeatable=True, locust=True))
    classes: tuple[str, ...] = field(default=(), metadata=flag(
        "--only", "Run only these workload classes (repeatable).", choices=CLASS_NAMES,
        repeatable=True))
    users: int | None = field(default=None, metadata=flag(
        "--users", "Concurrent Locust users, spread over the workloads by weight: overrides "
        "the files' closed-loop `users`. Default: each closed workload runs its file's "
        "`users`.", kind=int, above=0))
    rate: float | None = field(default=None, metadata=flag(
        "--rate", "Total open-loop arrival rate, req/s (Poisson) instead of the files' load.",
        kind=float, above=0, locust=True))
    max_concurrency: int | None = field(default=None, metadata=flag(
        "--max-concurrency", "At most N open-loop requests (or sessions) in flight: an "
        "arrival that finds N waits for a slot before it is sent (its wait is recorded as "
        "queue_wait_ms; the latencies from schedule include it).", kind=int, above=0, locust=True))
    requests: int | None = field(default=None, metadata=flag(
        "--requests", "Stop after N requests in all (as `vllm bench serve --num-prompts`); "
        "the rates divide by the time the run really measured.", kind=int, above=0, locust=True))
    input_tokens: str | None = field(default=None, metadata=flag(
        "--input-tokens", LENGTH_HELP.format(what="Prompt length")))
    output_tokens: str | None = field(default=None, metadata=flag(
        "--output-tokens", LENGTH_HELP.format(what="Answer length (held with ignore_eos where "
                                             "the API has it)")))
    dataset: str | None = field(default=None, metadata=flag("--dataset", DATASET_HELP))
    duration: str | None = field(default=None, metadata=flag(
        "--duration", f"Run time: 30s, 2m, 1h. [default: {DEFAULT_DURATION}; with "
        f"--requests, a cap of {REQUESTS_TIME_CAP}]", duration=True))
    telemetry: str = field(default="prom,loadgen", metadata=flag(
        "--telemetry", "Sources: nvml, prom (the target's /metrics), prom=URL, loadgen; or "
        "none.", show_default=True, locust=True))
    slo: str = field(default="", metadata=flag(
        "--slo", "e.g. ttft_p99_ms=500,tpot_p99_ms=50 (exit 1 if missed).", locust=True))
    percentiles: str = field(default=DEFAULT_PERCENTILES_TEXT, metadata=flag(
        "--percentiles", PERCENTILES_HELP, show_default=True))
    name: str = field(default="run", metadata=flag(
        "--name", "Run name (folder suffix).", show_default=True))
    workers: int = field(default=0, metadata=flag(
        "--workers", "Locust worker processes (distributed mode); 0 = one process.", kind=int,
        show_default=True, at_least=0))
    results_dir: Path = field(default=Path("results"), metadata=flag(
        "--results-dir", "Folder that receives one results folder per run.", kind=Path,
        show_default=True, locust=True))
    model: str = field(default="", metadata=flag(
        "--model", "Model to request (default: the target's first).", locust=True))
    tokenizer: Path | None = field(default=None, metadata=flag(
        "--tokenizer", TOKENIZER_HELP, kind=Path, locust=True, in_web_ui=False))
    seed: int = field(default=DEFAULT_SEED, metadata=flag(
        "--seed", "Seed for prompts, lengths and arrivals (one stream per worker).", kind=int,
        show_default=True, locust=True))
    sim_args: str = field(default="", metadata=flag(
        "--sim-args", "Extra arguments for the embedded target.", locust=True, in_web_ui=False))
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
        "apart (idle vs under load), never in the workloads' figures. 0 = none.", kind=float,
        at_least=0, locust=True, in_web_ui=False))
    probe_prompt_tokens: int = field(default=16, metadata=flag(
        "--probe-prompt-tokens", "The probe's prompt, in tokens (about).", kind=int,
        show_default=True, at_least=1, locust=True, in_web_ui=False))
    probe_output_tokens: int = field(default=4, metadata=flag(
        "--probe-output-tokens", "The probe's answer, in tokens.", kind=int,
        show_default=True, at_least=1, locust=True, in_web_ui=False))
    probe_idle: str = field(default="5s", metadata=flag(
        "--probe-idle", "How long the probe runs alone before the load (its idle baseline); "
        "added to the run's time.", show_default=True, duration=True, locust=True, in_web_ui=False))
    answer_probe: bool = field(default=False, metadata=flag(
        "--answer-probe", "Answers under load: send a fixed set of prompts at temperature 0 "
        "(fixed seed, logprobs asked) once alone before the load and once beside it; report "
        "which answers changed and where (openai-chat, openai-completions).", kind=bool,
        locust=True, in_web_ui=False))
    selfcheck: bool = field(default=False, metadata=flag(
        "--selfcheck", "First certify the client at this load on this machine (as `zerohop "
        "selfcheck` does); the certificate goes into the run's folder and report.",
        kind=bool))
    selfcheck_duration: str = field(default="20s", metadata=flag(
        "--selfcheck-duration", "How long the self-check drives the load (with --selfcheck).",
        show_default=True, duration=True))
    stop_when_saturated: bool = field(default=False, metadata=flag(
        "--stop-when-saturated", "End the load once the live saturation verdict says the "
        "target fell behind it (docs/saturation.md): the run then finishes as usual, its "
        "figures over the time the load ran.", kind=bool))
    plugins: tuple[str, ...] = field(default=(), metadata=flag(
        "--plugin", "Import this module first, in every process of the run (repeatable): a "
        "plugin that registers workload kinds, APIs or report sections (the entry points "
        "of `zerohop.plugins` load too).", repeatable=True))

    def check(self) -> None:
        """Refuse a bad value, or two that do not go together, with a ValueError of one
        line that names the flag (the CLI exits 2 with it). The workload files are
        checked where they are read (`cli.main_job`)."""
        from zerohop.client.answer_tokens import answer_api_refusal
        from zerohop.core.percentile_choice import parse_percentiles
        from zerohop.workloads.content.local_tokenizer import load_local_tokenizer

        self.check_values()
        if self.users is not None and self.rate is not None:
            raise ValueError("--users and --rate are exclusive (closed or open loop)")
        self._check_concurrency_cap()
        if self.duration_s <= 0:
            raise ValueError("--duration must be > 0")
        if self.host and not re.match(r"^https?://[^/\s]+", self.host):
            raise ValueError(f"--host: {self.host!r} is not an http:// URL")
        _check_telemetry(self.telemetry)
        self.slo_targets  # noqa: B018 - parsed for its error
        parse_percentiles(self.percentiles or DEFAULT_PERCENTILES_TEXT)
        refusal = answer_api_refusal(self.api) if self.answer_probe else None
        if refusal is not None:
            raise ValueError(refusal)
        if self.tokenizer is not None:
            load_local_tokenizer(self.tokenizer)

    def check_values(self) -> None:
        """Each value against its own flag's bounds (a ValueError names the flag)."""
        for item in dataclasses.fields(self):
            _check_value(item.metadata["flag"], getattr(self, item.name))

    def _check_concurrency_cap(self) -> None:
        """A cap only where arrivals are on the clock (with --users the users are the
        concurrency), and one slot for each worker at least."""
        if self.max_concurrency is None:
            return
        if self.users is not None:
            raise ValueError("--max-concurrency caps open-loop arrivals; with --users the "
                             "users are the concurrency")
        if self.max_concurrency < self.workers:
            raise ValueError("--max-concurrency must be >= --workers (each worker needs a "
                             "slot)")

    @property
    def duration_s(self) -> float:
        """The run's time; without --duration, 30 s, or the cap of a --requests run."""
        return parse_duration(self.duration or (
            REQUESTS_TIME_CAP if self.requests is not None else DEFAULT_DURATION), "--duration")

    @property
    def probe_idle_s(self) -> float:
        """The interference probe's idle phase, in seconds."""
        return parse_duration(self.probe_idle or "0", "--probe-idle")

    @property
    def slo_targets(self) -> dict[str, float]:
        """`--slo` as {"ttft_p99_ms": 500.0, ...}; a `SloError` (a ValueError) names the
        bad part."""
        return parse_slo(self.slo)

    @property
    def sim_argv(self) -> list[str]:
        """`--sim-args` split as a shell would."""
        return shlex.split(self.sim_args)

    def to_json(self) -> dict[str, Any]:
        """The settings as JSON values (paths as text, repeated flags as lists)."""
        return {item.name: _json_value(getattr(self, item.name))
                for item in dataclasses.fields(self)}

    @classmethod
    def from_json(cls, values: Mapping[str, Any]) -> RunSettings:
        """Settings from JSON values (`to_json`'s, or Locust's parsed flags), each
        typed as its field declares; a setting left out keeps its default."""
        fields = cls.__dataclass_fields__
        return cls(**{name: _typed(fields[name].metadata["flag"], value)
                      for name, value in values.items()})


def _check_value(flag: Flag, value: Any) -> None:
    if value is None or flag.kind is bool:
        return
    if flag.above is not None and value <= flag.above:
        raise ValueError(f"{flag.name} must be > {flag.above:g}")
    if flag.at_least is not None and value < flag.at_least:
        raise ValueError(f"{flag.name} must be >= {flag.at_least:g}")
    if flag.duration:
        parse_duration(value, flag.name)


def _check_telemetry(spec: str) -> None:
    from zerohop.telemetry.spec import parse_telemetry_spec

    parts = [p for p in spec.split(",") if p.strip() and p.strip() != "prom"]
    parse_telemetry_spec(",".join(parts))


def _json_value(value: Any) -> Any:
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, tuple):
        return [_json_value(v) for v in value]
    return value


def _typed(flag: Flag, value: Any) -> Any:
    """A JSON value as its field's type: a path, a tuple for a repeated flag."""
    if flag.repeatable:
        return tuple(Path(v) if flag.kind is Path else v for v in value or ())
    if flag.kind is Path:
        return Path(value) if value not in (None, "") else None
    return value


def parse_duration(text: str, flag: str = "--duration") -> float:
    """`90`, `90s`, `2m`, `1h30m` → seconds; a ValueError names `flag`."""
    text = text.strip().lower()
    if re.fullmatch(r"\d+(\.\d+)?", text):
        return float(text)
    parts = re.findall(r"(\d+(?:\.\d+)?)([hms])", text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise ValueError(f"{flag}: {text!r} is not like 30s, 2m or 1h30m")
    return sum(float(n) * {"h": 3600, "m": 60, "s": 1}[u] for n, u in parts)


def parse_slo(text: str) -> dict[str, float]:
    """`ttft_p99_ms=500,tpot_p99_ms=50` → {"ttft_p99_ms": 500.0, ...} in the one SLO
    grammar (`core.slo`); a `SloError` (a ValueError) names the bad part."""
    return {target.key: target.threshold_ms for target in parse_slo_text(text, "--slo")}


def setting_fields() -> list[tuple[str, Flag, Any]]:
    """(field name, flag, default) for every setting, in the CLI's order."""
    return [(f.name, f.metadata["flag"], f.default) for f in dataclasses.fields(RunSettings)]


def flag_of(name: str) -> Flag:
    """The flag of the setting `name` (a field of `RunSettings`)."""
    flag: Flag = RunSettings.__dataclass_fields__[name].metadata["flag"]
    return flag

