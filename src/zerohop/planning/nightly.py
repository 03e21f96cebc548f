"""`zerohop nightly --config FILE --history DIR`: a fixed profile run as repeated
samples, appended to a history index, compared with a baseline, reported with trends;
exit 1 on a regression.

Noise-aware in two layers, because one short run on a shared machine proves little:
1. the samples of each side are pooled and compared with the report's own bootstrap
   machinery (`report.compare.compare_runs`: per-percentile deltas, confidence
   intervals, relative-threshold presets) — a delta must clear both;
2. the run-to-run noise band (`noise_band`): a delta inside it, or a candidate whose
   samples all fall where the baseline's did, is "within noise", never better or worse.

History layout: `DIR/history.jsonl` (one entry per nightly), `DIR/runs/<id>/` (the
sample runs and the pooled comparison page), `DIR/nightly-<id>.html` and
`DIR/latest.html` (verdict and trend charts).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import json
import math
import shlex
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import click
import numpy as np
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from zerohop.cli.main_job import EXIT_BAD_INPUT, RunError, RunPlan, RunResult, run_once
from zerohop.planning.noise_band import sample_figures_of, spread, within_noise
from zerohop.storage.jsonl import without_nan

HISTORY_FILE = "history.jsonl"
EXIT_PASS, EXIT_REGRESSION = 0, 1
Status = Literal["baseline", "pass", "regression", "improved"]
Runner = Callable[[RunPlan], RunResult]


# --- the profile -----------------------------------------------------------------------
class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TargetConfig(Strict):
    host: str | None = Field(default=None, description="Base URL; null = embedded target")
    sim_args: str = Field(default="", description="Embedded target options")
    api: Literal["openai-chat", "openai-completions", "anthropic"] = "openai-chat"
    model: str = ""


ClassName = Literal["ShortQueryFlood", "LongContextSummarisation", "LoRAMix", "TraceReplay"]


class LoadConfig(Strict):
    workloads: list[Path] = Field(default_factory=list, description="Relative to the config")
    only: list[ClassName] = Field(default_factory=list, description="Workload classes to run")
    rate: float | None = Field(default=None, gt=0, description="Open-loop req/s")
    users: int | None = Field(default=None, gt=0, description="Closed-loop users")
    duration_s: float = Field(default=20.0, gt=0)
    seed: int = 1234
    telemetry: str = "loadgen"

    @model_validator(mode="after")
    def _one_load_model(self) -> LoadConfig:
        if self.rate is not None and self.users is not None:
            raise ValueError("rate and users are exclusive (open or closed loop)")
        return self


MetricName = Literal["ttft_ms", "tpot_ms", "itl_ms", "e2e_ms"]
GateStat = Literal["p50", "p90", "p95", "p99"]


def _default_metrics() -> list[MetricName]:
    return ["ttft_ms", "tpot_ms", "e2e_ms"]


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


class NightlyConfig(Strict):
    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_.-]+$")
    target: TargetConfig = Field(default_factory=TargetConfig)
    load: LoadConfig = Field(default_factory=LoadConfig)
    samples: int = Field(default=3, ge=2, le=20, description="Repeated runs per nightly")
    microbench: Literal["auto", "on", "off"] = "auto"
    compare: CompareConfig = Field(default_factory=CompareConfig)

    def fingerprint(self) -> str:
        """What must be equal for two nightlies to be comparable (not the thresholds)."""
        data = self.model_dump(mode="json", include={"target", "load", "samples"})
        data["target"].pop("sim_args", None)  # the thing under test may change
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
        from zerohop.cli.main_job import classes_for
        from zerohop.loadgen.workload_binding import load_workloads

        try:
            specs = load_workloads([str(p) for p in config.load.workloads])
        except ValueError as exc:
            raise ValueError(f"--config {path}: load.workloads: {exc}") from None
        config.load.only = classes_for(specs)  # type: ignore[assignment]
    return config


# --- one nightly ---------------------------------------------------------------------------
@dataclass(frozen=True)
class GateRow:
    """One gated (metric, percentile): the pooled bootstrap verdict and the noise band."""

    metric: str
    stat: str
    base: float
    candidate: float
    delta: float
    delta_pct: float
    ci_low: float
    ci_high: float
    noise_band: float
    bootstrap_verdict: str
    verdict: str  # worse / better / within noise / no data


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
    entry: dict[str, Any] = {
        "id": entry_id,
        "created_at": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "profile": config.name,
        "fingerprint": config.fingerprint(),
        "label": label,
        "sim_args": config.target.sim_args,
        "samples": [str(d.relative_to(history_dir)) for d in sample_dirs],
        "figures": sample_figures(sample_dirs, config.compare.metrics),
        "microbench": microbench_medians(sample_dirs),
    }
    gates: list[GateRow] = []
    notes: list[str] = []
    if baseline is None:
        entry.update(status="baseline", baseline_id=None, marked_baseline=True)
        if not set_baseline:
            notes.append("no comparable baseline in the history: this nightly becomes it")
    else:
        base_dirs = [history_dir / s for s in baseline["samples"]]
        gates, comparison = compare_samples(base_dirs, sample_dirs, config.compare)
        _write_comparison_page(comparison, run_root / "compare.html")
        mb_notes, mb_regressed = compare_microbench(
            baseline.get("microbench") or {}, entry["microbench"],
            config.compare.microbench_threshold)
        notes += mb_notes
        entry.update(
            status=_status(gates, mb_regressed), baseline_id=baseline["id"],
            marked_baseline=False,
            gates=[dataclasses.asdict(g) for g in gates],
            regressions=[f"{g.metric} {g.stat}" for g in gates if g.verdict == "worse"]
            + (["microbench"] if mb_regressed else []),
        )
    entry["notes"] = notes
    append_history(history_dir, without_nan(entry))
    history.append(entry)
    page = write_nightly_page(history_dir, history, entry, gates, baseline)
    return NightlyOutcome(entry, EXIT_REGRESSION if entry["status"] == "regression" else
                          EXIT_PASS, page)


def run_samples(config: NightlyConfig, run_root: Path, runner: Runner | None) -> list[Path]:
    """`samples` independent runs of the same seeded workload (a fresh embedded target
    each time). Microbenchmarks run with the first sample only."""
    runner = runner or (lambda p: run_once(p, announce=False))
    dirs = []
    for i in range(config.samples):
        plan = RunPlan(
            host=config.target.host, api=config.target.api,
            workloads=list(config.load.workloads), classes=list(config.load.only),
            users=config.load.users or 8, rate=config.load.rate,
            duration_s=config.load.duration_s, telemetry=config.load.telemetry, slo={},
            name=f"{config.name}-s{i + 1}", workers=0, results_dir=run_root,
            seed=config.load.seed, sim_args=shlex.split(config.target.sim_args),
            model=config.target.model, report=False,
            microbench=config.microbench if i == 0 else "off",
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


def compare_samples(
    base_dirs: Sequence[Path], cand_dirs: Sequence[Path], settings: CompareConfig
) -> tuple[list[GateRow], Any]:
    """Pooled bootstrap comparison, gated by the run-to-run noise band."""
    from zerohop.analysis.compare import CompareSettings, compare_runs
    from zerohop.storage.run_reader import load_run

    base_runs = [load_run(d) for d in base_dirs]
    cand_runs = [load_run(d) for d in cand_dirs]
    comparison = compare_runs(
        pool_runs(base_runs, "baseline"), pool_runs(cand_runs, "candidate"),
        CompareSettings(threshold=settings.threshold, n_boot=settings.n_boot,
                        confidence=settings.confidence), layer=False)
    workload = comparison.workloads[-1]  # "all" (or the only workload)
    rows = []
    for metric in workload.metrics:
        if metric.metric not in settings.metrics:
            continue
        for row in metric.rows:
            if row.stat not in settings.stats:
                continue
            base = sample_figures_of(base_runs, metric.metric, row.stat)
            cand = sample_figures_of(cand_runs, metric.metric, row.stat)
            band = max(spread(base), spread(cand))
            verdict = row.verdict
            if verdict in ("worse", "better") and within_noise(row.delta, base, cand, band):
                verdict = "within noise"
            rows.append(GateRow(metric.metric, row.stat, row.base, row.candidate, row.delta,
                                row.delta_pct, row.ci_low, row.ci_high, band, row.verdict,
                                verdict))
    return rows, comparison


def pool_runs(runs: Sequence[Any], label: str) -> Any:
    """Several samples as one RunData (requests concatenated, ITL offsets shifted)."""
    import pandas as pd

    from zerohop.analysis.run_data import ItlColumn, RunData

    frames = [r.requests for r in runs]
    pooled = pd.concat(frames, ignore_index=True)
    for column in frames[0].columns:
        if isinstance(frames[0][column].dtype, pd.CategoricalDtype):
            pooled[column] = pooled[column].astype(object).astype("category")
    values = np.concatenate([r.itl.values for r in runs])
    offsets = [np.array([0], dtype=np.int64)]
    shift = 0
    for r in runs:
        offsets.append(r.itl.offsets[1:] + shift)
        shift += int(r.itl.offsets[-1])
    first = runs[0]
    manifest = dict(first.manifest, run_id=f"{label} ({len(runs)} samples)")
    return RunData(
        run_dir=first.run_dir, manifest=manifest, requests=pooled,
        itl=ItlColumn(values=values, offsets=np.concatenate(offsets)),
        telemetry=first.telemetry.iloc[0:0], microbench=None,
        requests_source=first.requests_source, notes=[],
    )


def _status(gates: Sequence[GateRow], microbench_regressed: bool) -> Status:
    verdicts = {g.verdict for g in gates}
    if "worse" in verdicts or microbench_regressed:
        return "regression"
    return "improved" if "better" in verdicts else "pass"


# --- figures kept in the history ----------------------------------------------------------
def sample_figures(dirs: Sequence[Path], metrics: Sequence[str]) -> dict[str, Any]:
    """Per metric: pooled p50/p90/p99 and each sample's p50 (for the trend charts)."""
    from zerohop.analysis.compare import ok_values
    from zerohop.analysis.summary import ALL_WORKLOADS
    from zerohop.storage.run_reader import load_run

    runs = [load_run(d) for d in dirs]
    out: dict[str, Any] = {}
    for metric in metrics:
        per = [ok_values(r, ALL_WORKLOADS, metric) for r in runs]
        pooled = np.concatenate(per) if per else np.array([])
        out[metric] = {
            "n": int(pooled.size),
            **{f"p{q}": float(np.percentile(pooled, q)) if pooled.size else None
               for q in (50, 90, 99)},
            "sample_p50": [float(np.percentile(v, 50)) if v.size else None for v in per],
        }
    ok = sum(int((r.requests["outcome"] == "ok").sum()) for r in runs)
    total = sum(len(r.requests) for r in runs)
    out["error_pct"] = 100.0 * (total - ok) / total if total else None
    return out


def microbench_medians(dirs: Sequence[Path]) -> dict[str, dict[str, Any]]:
    """`benchmark.metric` → {median, unit} from the samples' microbench.json (if any)."""
    out: dict[str, dict[str, Any]] = {}
    for d in dirs:
        path = d / "microbench.json"
        if not path.is_file():
            continue
        try:
            doc = json.loads(path.read_text("utf-8"))
        except (OSError, json.JSONDecodeError):
            continue
        for bench, body in (doc.get("benchmarks") or {}).items():
            for name, stat in ((body or {}).get("metrics") or {}).items():
                median = stat.get("median", stat.get("p50")) if isinstance(stat, dict) else None
                if isinstance(median, int | float) and math.isfinite(median):
                    out[f"{bench}.{name}"] = {"median": float(median), "unit": stat.get("unit")}
    return out


def compare_microbench(base: dict[str, Any], cand: dict[str, Any],
                       threshold: float) -> tuple[list[str], bool]:
    """Medians of thousands of GPU samples: a move beyond the threshold in the worse
    direction (higher for times, lower for rates) counts."""
    notes, regressed = [], False
    for key in sorted(set(base) & set(cand)):
        b, c = base[key]["median"], cand[key]["median"]
        if not b:
            continue
        change = (c - b) / abs(b)
        higher_is_better = key.endswith(("_gbps", "_per_s"))
        worse = change < -threshold if higher_is_better else change > threshold
        if worse:
            regressed = True
            notes.append(f"microbench {key}: {b:.4g} → {c:.4g} ({change:+.1%})")
    return notes, regressed


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


# --- pages ---------------------------------------------------------------------------------
def write_nightly_page(history_dir: Path, history: Sequence[dict[str, Any]],
                       entry: dict[str, Any], gates: Sequence[GateRow],
                       baseline: dict[str, Any] | None) -> Path:
    """`nightly-<id>.html` (and a copy as `latest.html`): verdict, gates, trends."""
    from zerohop.report.render import render_page, write_atomically

    context, charts = nightly_page(history, entry, gates, baseline)
    html = render_page("nightly.html.j2", context, charts)
    page = write_atomically(Path(history_dir) / f"nightly-{entry['id']}.html", html)
    write_atomically(Path(history_dir) / "latest.html", html)
    return page


def nightly_page(history: Sequence[dict[str, Any]], entry: dict[str, Any],
                 gates: Sequence[GateRow], baseline: dict[str, Any] | None
                 ) -> tuple[dict[str, Any], list[Any]]:
    from zerohop.report import formatting as fmt
    from zerohop.report.charts import Chart, Series

    same = [e for e in history if e.get("profile") == entry["profile"]]
    x = np.arange(1, len(same) + 1, dtype=float)
    charts = []
    metrics = [m for m in (entry.get("figures") or {}) if m.endswith("_ms")]
    for metric in metrics:
        def column(key: str, metric: str = metric) -> np.ndarray:
            return np.array([_num((e.get("figures") or {}).get(metric, {}).get(key))
                             for e in same])
        series = [Series("p50 (pooled)", column("p50")), Series("p90 (pooled)", column("p90"))]
        width = max((len((e.get("figures") or {}).get(metric, {}).get("sample_p50") or [])
                     for e in same), default=0)
        for i in range(width):
            series.append(Series(f"sample {i + 1} p50", np.array(
                [_num(_at((e.get("figures") or {}).get(metric, {}).get("sample_p50"), i))
                 for e in same]), "points"))
        marks = np.array([_num((e.get("figures") or {}).get(metric, {}).get("p50"))
                          if e.get("status") == "regression" else math.nan for e in same])
        if np.isfinite(marks).any():
            series.append(Series("regression", marks, "points"))
        charts.append(Chart(chart_id=f"chart-trend-{metric}", title=f"{metric} over the history",
                            kind="xy", x=x, series=series, x_label="nightly #", y_label="ms"))
    rows = [{
        "metric": g.metric, "stat": g.stat, "base": fmt.ms(g.base),
        "candidate": fmt.ms(g.candidate), "delta": fmt.signed_ms(g.delta),
        "delta_pct": fmt.signed_pct(g.delta_pct),
        "ci": f"[{fmt.signed_ms(g.ci_low)}, {fmt.signed_ms(g.ci_high)}]",
        "band": fmt.ms(g.noise_band), "bootstrap": g.bootstrap_verdict, "verdict": g.verdict,
    } for g in gates]
    history_rows = [{
        "id": e["id"], "created_at": e.get("created_at", ""), "status": e.get("status", ""),
        "baseline": e.get("baseline_id") or ("(marked)" if e.get("marked_baseline") else "—"),
        "label": e.get("label") or "",
        "regressions": ", ".join(e.get("regressions") or []) or "—",
    } for e in reversed(same)]
    status = entry["status"]
    context = {
        "title": f"zerohop nightly — {entry['profile']}",
        "generated_at": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC"),
        "status": status,
        "overall": {"regression": "fail", "pass": "ok", "improved": "ok",
                  "baseline": "none"}[status],
        "headline": _headline(entry),
        "baseline_id": baseline["id"] if baseline else "—",
        "samples": entry["samples"],
        "gates": rows,
        "notes": entry.get("notes") or [],
        "compare_link": f"runs/{entry['id']}/compare.html" if baseline else "",
        "history": history_rows,
        "charts": [c.chart_id for c in charts],
        "chart_titles": {c.chart_id: c.title for c in charts},
    }
    return context, charts


def _headline(entry: dict[str, Any]) -> str:
    status = entry["status"]
    if status == "baseline":
        return "baseline recorded (nothing to compare with)"
    if status == "regression":
        return "REGRESSION: " + ", ".join(entry.get("regressions") or [])
    return "no regression" + (" (improved)" if status == "improved" else "")


def _num(value: Any) -> float:
    return float(value) if isinstance(value, int | float) else math.nan


def _at(values: Any, i: int) -> Any:
    return values[i] if isinstance(values, list) and i < len(values) else None


def _write_comparison_page(comparison: Any, out: Path) -> None:
    from zerohop.report.build import write_comparison

    write_comparison([comparison], out)


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
    click.echo(f"nightly {entry['id']}: {_headline(entry)}")
    for gate in entry.get("gates") or []:
        if gate["verdict"] != "within noise":
            click.echo(f"  {gate['metric']} {gate['stat']}: {gate['base']} → "
                       f"{gate['candidate']} ms (noise band {gate['noise_band']} ms) — "
                       f"{gate['verdict']}")
    for note in entry.get("notes") or []:
        click.echo(f"  note: {note}")
    click.echo(f"nightly page: {outcome.page}")
    sys.exit(outcome.exit_code)


__all__ = ["NightlyConfig", "load_config", "nightly_command", "run_nightly"]
