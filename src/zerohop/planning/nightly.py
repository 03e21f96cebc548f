"""`zerohop nightly --config FILE --history DIR`: a fixed profile run as repeated
samples, appended to a history index, compared with a baseline, reported with trends;
exit 1 on a regression.

Noise-aware in two layers, because one short run on a shared machine proves little:
1. the samples of each side are pooled and compared with the report's own bootstrap
   machinery (`analysis.compare.compare_runs`: per-percentile deltas, confidence
   intervals, relative-threshold presets) — a delta must clear both;
2. the run-to-run noise band (`noise_band`): a delta inside it, or a candidate whose
   samples all fall where the baseline's did, is "within noise", never better or worse.

This module holds the profile, the run of the samples, the history and the command;
the judgement is in `nightly_gates`, the pages in `nightly_page`.

History layout: `DIR/history.jsonl` (one entry per nightly), `DIR/runs/<id>/` (the
sample runs and the pooled comparison page), `DIR/nightly-<id>.html` and
`DIR/latest.html` (verdict and trend charts).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import json
import shlex
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

import click
import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    model_validator,
)

from zerohop.core.apis import DEFAULT_API, ApiName
from zerohop.core.exit_codes import EXIT_BAD_INPUT, EXIT_OK, EXIT_REGRESSION, RunError
from zerohop.core.metrics import NIGHTLY_GATES, REQUEST_LATENCIES
from zerohop.core.redaction import known_secrets, scrub
from zerohop.loadgen.run_settings import DEFAULT_SEED
from zerohop.planning.nightly_answers import answers_gate, answers_line
from zerohop.planning.nightly_gates import (
    GateRow,
    Samples,
    compare_microbench,
    compare_samples,
    gate_status,
    microbench_medians,
    sample_figures,
)
from zerohop.planning.nightly_page import headline, write_comparison_page, write_nightly_page
from zerohop.report import formatting as fmt
from zerohop.runner.plan import RunPlan, users_for
from zerohop.runner.run_once import RunResult, run_once
from zerohop.storage.jsonl import without_nan

HISTORY_FILE = "history.jsonl"
Runner = Callable[[RunPlan], RunResult]


# --- the profile -----------------------------------------------------------------------
class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TargetConfig(Strict):
    host: str | None = Field(default=None, description="Base URL; null = embedded target")
    sim_args: str = Field(default="", description="Embedded target options")
    api: ApiName = DEFAULT_API
    model: str = ""


ClassName = Literal["ShortQueryFlood", "LongContextSummarisation", "LoRAMix", "TraceReplay",
                    "Conversation", "SharedPrefix", "Agent", "Embedding", "Rerank"]


class LoadConfig(Strict):
    workloads: list[Path] = Field(default_factory=list, description="Relative to the config")
    only: list[ClassName] = Field(default_factory=list, description="Workload classes to run")
    rate: float | None = Field(default=None, gt=0, description="Open-loop req/s")
    users: int | None = Field(default=None, gt=0,
                              description="Concurrent users spread by weight over the "
                              "workloads (default: each closed workload's own `users`)")
    duration_s: float = Field(default=20.0, gt=0)
    seed: int = DEFAULT_SEED
    telemetry: str = "loadgen"

    @model_validator(mode="after")
    def _one_load_model(self) -> LoadConfig:
        if self.rate is not None and self.users is not None:
            raise ValueError("rate and users are exclusive (open or closed loop)")
        return self


def _compared_metric(name: str) -> str:
    """A metric the comparison judges: one of the catalogue's per-request latencies."""
    if name not in REQUEST_LATENCIES:
        raise ValueError(f"{name!r} is not compared (choose from {', '.join(REQUEST_LATENCIES)})")
    return name


MetricName = Annotated[str, AfterValidator(_compared_metric)]
GateStat = Literal["p50", "p90", "p95", "p99"]


def _default_metrics() -> list[str]:
    return list(NIGHTLY_GATES)


def _default_stats() -> list[GateStat]:
    return ["p50", "p90"]


class CompareConfig(Strict):
    threshold: Literal["strict", "default", "lenient"] = "default"
    metrics: list[MetricName] = Field(default_factory=_default_metrics, min_length=1)
    stats: list[GateStat] = Field(
        default_factory=_default_stats, min_length=1,
        description="Percentiles that can fail the nightly (p99 of a short run is noise)")
    baseline: str = Field(default="marked", description="marked | latest-good | <entry id>")
    confidence: float = Field(default=0.95, ge=0.5, lt=1.0)
    n_boot: int = Field(default=2000, ge=100)
    microbench_threshold: float = Field(default=0.10, ge=0,
                                        description="Relative change of a median that counts")


class AnswersConfig(Strict):
    probe: bool = Field(default=False, description="Every sample runs with --answer-probe")
    max_changed: float | None = Field(
        default=None, ge=0.0, le=1.0,
        description="Fail the night when more than this share of the answers, pooled over "
        "the samples, changed under load (compare --max-answers-changed)")

    @model_validator(mode="after")
    def _gate_needs_probe(self) -> AnswersConfig:
        if self.max_changed is not None and not self.probe:
            raise ValueError("max_changed gates the answer probe: set probe: true")
        return self


class NightlyConfig(Strict):
    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_.-]+$")
    target: TargetConfig = Field(default_factory=TargetConfig)
    load: LoadConfig = Field(default_factory=LoadConfig)
    samples: int = Field(default=3, ge=2, le=20, description="Repeated runs per nightly")
    microbench: Literal["auto", "on", "off"] = "auto"
    compare: CompareConfig = Field(default_factory=CompareConfig)
    answers: AnswersConfig = Field(default_factory=AnswersConfig)

    @model_validator(mode="after")
    def _probe_api(self) -> NightlyConfig:
        from zerohop.client.answer_tokens import answer_api_refusal

        refusal = answer_api_refusal(self.target.api) if self.answers.probe else None
        if refusal is not None:
            needs = refusal.removeprefix("--answer-probe ")
            raise ValueError(f"answers.probe: the answer probe {needs}")
        return self

    def fingerprint(self) -> str:
        """What must be equal for two nightlies to be comparable (not the thresholds).
        The answer probe's requests share the load: a night with it compares only with
        nights with it (and a profile without it keeps its fingerprint)."""
        data = self.model_dump(mode="json", include={"target", "load", "samples"})
        data["target"].pop("sim_args", None)  # the thing under test may change
        if self.answers.probe:
            data["answer_probe"] = True
        return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:12]


def load_config(path: Path) -> NightlyConfig:
    """Read and validate the profile; ValueError names the field."""
    try:
        data = yaml.safe_load(Path(path).read_text("utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise ValueError(f"--config: cannot read {path}: {exc}") from None
    if not isinstance(data, dict):
        raise ValueError(f"--config {path}: the top level must be a mapping")
    try:
        config = NightlyConfig.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "(top level)"
        message = str(err["msg"]).removeprefix("Value error, ")
        raise ValueError(f"--config {path}: {where}: {message}") from None
    base = Path(path).resolve().parent
    config.load.workloads = [p if p.is_absolute() else base / p for p in config.load.workloads]
    for workload in config.load.workloads:
        if not workload.is_file():
            raise ValueError(f"--config {path}: load.workloads: {workload} not found")
    if config.load.workloads and not config.load.only:
        from zerohop.runner.plan import classes_for
        from zerohop.workloads.inputs import load_workloads

        try:
            specs = load_workloads([str(p) for p in config.load.workloads])
        except ValueError as exc:
            raise ValueError(f"--config {path}: load.workloads: {exc}") from None
        config.load.only = classes_for(specs)  # type: ignore[assignment]
    return config


# --- one nightly ---------------------------------------------------------------------------
@dataclass
class NightlyOutcome:
    entry: dict[str, Any]
    exit_code: int
    page: Path


def run_nightly(
    config: NightlyConfig,
    history_dir: Path,
    *,
    runner: Runner | None = None,
    set_baseline: bool = False,
    label: str = "",
) -> NightlyOutcome:
    """Run the samples, compare with the baseline, append to the history, write pages."""
    history_dir = Path(history_dir)
    history = read_history(history_dir)
    baseline = None if set_baseline else choose_baseline(history, config)
    entry_id = _new_id(history)
    run_root = history_dir / "runs" / entry_id
    sample_dirs = run_samples(config, run_root, runner)
    samples = Samples.load(sample_dirs, "candidate", pooled_summary=True)
    entry: dict[str, Any] = {
        "id": entry_id,
        "created_at": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "profile": config.name,
        "fingerprint": config.fingerprint(),
        "label": label,
        "sim_args": scrub(config.target.sim_args, known_secrets()),  # may hold --api-key
        "samples": [str(d.relative_to(history_dir)) for d in sample_dirs],
        "figures": sample_figures(samples, config.compare.metrics),
        "microbench": microbench_medians(sample_dirs),
    }
    gates: list[GateRow] = []
    notes: list[str] = []
    answers = None
    if config.answers.probe:
        answers = answers_gate(sample_dirs, config.answers.max_changed)
        entry["answers"] = answers
        notes.append(answers_line(answers))
    if baseline is None:
        entry.update(status="baseline", baseline_id=None, marked_baseline=True)
        if not set_baseline:
            notes.append("no comparable baseline in the history: this nightly becomes it")
    else:
        base_dirs = [history_dir / s for s in baseline["samples"]]
        gates, comparison = compare_samples(Samples.load(base_dirs, "baseline"), samples,
                                            config.compare)
        write_comparison_page(comparison, run_root / "compare.html")
        mb_notes, mb_regressed = compare_microbench(
            baseline.get("microbench") or {}, entry["microbench"],
            config.compare.microbench_threshold)
        notes += mb_notes
        entry.update(
            status=gate_status(gates, mb_regressed), baseline_id=baseline["id"],
            marked_baseline=False,
            gates=[dataclasses.asdict(g) for g in gates],
            regressions=[f"{g.metric} {g.stat}" for g in gates if g.verdict == "worse"]
            + (["microbench"] if mb_regressed else []),
        )
    if answers is not None and answers["failed"]:  # a night's answers: no baseline needed
        entry.update(status="regression",
                     regressions=[*(entry.get("regressions") or []), "answers changed"])
    entry["notes"] = notes
    append_history(history_dir, without_nan(entry))
    history.append(entry)
    page = write_nightly_page(history_dir, history, entry, gates, baseline)
    return NightlyOutcome(entry, EXIT_REGRESSION if entry["status"] == "regression" else
                          EXIT_OK, page)


def run_samples(config: NightlyConfig, run_root: Path, runner: Runner | None) -> list[Path]:
    """`samples` independent runs of the same seeded workload (a fresh embedded target
    each time). Microbenchmarks run with the first sample only."""
    from zerohop.workloads.inputs import load_workloads

    runner = runner or (lambda p: run_once(p, announce=False))
    users = config.load.users or users_for(load_workloads(config.load.workloads),
                                           config.load.only)
    dirs = []
    for i in range(config.samples):
        plan = RunPlan(
            host=config.target.host, api=config.target.api,
            workloads=list(config.load.workloads), classes=list(config.load.only),
            users=users, users_from_files=config.load.users is None, rate=config.load.rate,
            duration_s=config.load.duration_s, telemetry=config.load.telemetry, slo={},
            name=f"{config.name}-s{i + 1}", workers=0, results_dir=run_root,
            seed=config.load.seed, sim_args=shlex.split(config.target.sim_args),
            model=config.target.model, report=False,
            microbench=config.microbench if i == 0 else "off",
            answer_probe=config.answers.probe,
        )
        click.echo(f"zerohop nightly: sample {i + 1} of {config.samples}")
        dirs.append(runner(plan).run_dir)
    return dirs


def choose_baseline(history: Sequence[dict[str, Any]],
                    config: NightlyConfig) -> dict[str, Any] | None:
    """The entry to compare with: same profile and fingerprint; `marked` = the latest
    entry marked as baseline, `latest-good` = the latest that did not regress, else the
    entry with that id."""
    same = [e for e in history if e.get("profile") == config.name
            and e.get("fingerprint") == config.fingerprint()]
    mode = config.compare.baseline
    if mode == "marked":
        chosen = [e for e in same if e.get("marked_baseline")]
    elif mode == "latest-good":
        chosen = [e for e in same if e.get("status") != "regression"]
    else:
        chosen = [e for e in same if e.get("id") == mode]
        if not chosen:
            raise ValueError(f"compare.baseline: no entry {mode!r} for profile {config.name}")
    return chosen[-1] if chosen else None


# --- history -----------------------------------------------------------------------------
def read_history(history_dir: Path) -> list[dict[str, Any]]:
    path = Path(history_dir) / HISTORY_FILE
    if not path.is_file():
        return []
    entries = []
    for number, line in enumerate(path.read_text("utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            entries.append(json.loads(line))
        except json.JSONDecodeError:
            raise ValueError(f"--history: {path} line {number} is not JSON") from None
    return entries


def append_history(history_dir: Path, entry: dict[str, Any]) -> None:
    """One line per nightly, appended and flushed (a crash never rewrites the past)."""
    path = Path(history_dir) / HISTORY_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as handle:
        handle.write(json.dumps(entry, allow_nan=False) + "\n")


def _new_id(history: Sequence[dict[str, Any]]) -> str:
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%d-%H%M%S")
    return f"{len(history) + 1:04d}-{stamp}"


# --- the command -----------------------------------------------------------------------
@click.command("nightly")
@click.option("--config", "config_path", required=True, type=click.Path(path_type=Path),
              help="Nightly profile (YAML).")
@click.option("--history", "history_dir", required=True, type=click.Path(path_type=Path),
              help="History folder (history.jsonl, runs, pages).")
@click.option("--set-baseline", is_flag=True, help="Record this nightly as the new baseline.")
@click.option("--label", default="", help="Free text kept with the entry (e.g. a commit).")
def nightly_command(config_path: Path, history_dir: Path, set_baseline: bool,
                    label: str) -> None:
    """Run the nightly profile, compare with the baseline, exit 1 on a regression."""
    try:
        try:
            config = load_config(config_path)
            if history_dir.exists() and not history_dir.is_dir():
                raise ValueError(f"--history: {history_dir} is not a folder")
            choose_baseline(read_history(history_dir), config)
        except ValueError as exc:
            raise RunError(str(exc), EXIT_BAD_INPUT) from None
        outcome = run_nightly(config, history_dir, set_baseline=set_baseline, label=label)
    except RunError as exc:
        click.echo(f"zerohop: error: {exc}", err=True)
        sys.exit(exc.code)
    entry = outcome.entry
    click.echo(f"nightly {entry['id']}: {headline(entry)}")
    for gate in entry.get("gates") or []:
        if gate["verdict"] != "within noise":
            click.echo(f"  {gate_line(gate)}")
    for note in entry.get("notes") or []:
        click.echo(f"  note: {note}")
    click.echo(f"nightly page: {outcome.page}")
    sys.exit(outcome.exit_code)


def gate_line(gate: dict[str, Any]) -> str:
    """`ttft_ms p99: 9.01 → 12.6 ms (noise band 0.087 ms) — worse`: rounded as the
    report rounds latencies, not a float's every digit."""
    return (f"{gate['metric']} {gate['stat']}: {fmt.ms(gate['base'])} → "
            f"{fmt.ms(gate['candidate'])} ms (noise band {fmt.ms(gate['noise_band'])} ms) — "
            f"{gate['verdict']}")


__all__ = ["NightlyConfig", "load_config", "nightly_command", "run_nightly"]
