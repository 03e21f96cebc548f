"""summary.json: read back from a results folder, its figures checked against the records
themselves (not against the analysis that wrote them), strict JSON, and its schema page
listing exactly the keys the code writes."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from tests.run_fixtures import read_summary
from tests.synthetic_runs import SyntheticRun, write_run
from zerohop.analysis.quantiles import PERCENTILES
from zerohop.analysis.summary_document import DISTRIBUTION_FIELDS, NAMED_KEYS
from zerohop.core.metrics import SUMMARISED
from zerohop.storage.summary_file import write_summary

pytestmark = pytest.mark.unit

DOC = Path(__file__).resolve().parents[2] / "docs" / "summary-json.md"


def _no_constants(name: str) -> float:
    raise AssertionError(f"summary.json holds {name}: not strict JSON")


def written(tmp_path: Path, **fields: Any) -> tuple[Path, dict[str, Any]]:
    run_dir = write_run(tmp_path, SyntheticRun(n_requests=600, **fields))
    path = write_summary(run_dir)
    document = json.loads(path.read_text(), parse_constant=_no_constants)
    assert document == read_summary(run_dir)
    return run_dir, document


def test_figures_match_the_records(tmp_path: Path) -> None:
    run_dir, doc = written(tmp_path, slo={"ttft_p99_ms": 400.0})
    records = pd.read_parquet(run_dir / "requests.parquet")
    assert doc["schema"] == "zerohop.summary" and doc["schema_version"] == 1
    assert doc["run"]["run_id"] == run_dir.name and doc["run"]["status"] == "completed"
    assert doc["run"]["models"] == sorted(records["model"].dropna().unique())

    # the window: no load duration in this manifest, so first arrival → last end
    arrival = records["scheduled_ts"].fillna(records["sent_ts"])
    span = records["end_ts"].max() - arrival.min()
    assert doc["window"]["source"] == "records"
    assert doc["window"]["duration_s"] == pytest.approx(span)

    names = [w["workload"] for w in doc["workloads"]]
    assert sorted(names) == sorted(records["workload"].unique())
    for entry in doc["workloads"]:
        mine = records[records["workload"] == entry["workload"]]
        ok = mine[mine["outcome"] == "ok"]
        assert entry["requests"] == len(mine) and entry["ok"] == len(ok)
        assert entry["errors"] == len(mine) - len(ok)
        assert entry["outcomes"] == mine["outcome"].value_counts().to_dict()
        assert entry["rates"]["req_per_s"] == pytest.approx(len(ok) / span)
        # offered: the requests that arrived (scheduled, else sent) in the window; a
        # window from the records holds the drain, so scheduled ones count over their span
        arrived = mine["scheduled_ts"].fillna(mine["sent_ts"])
        start = arrival.min()
        inside = (arrived >= start) & (arrived < start + span)
        due = mine.loc[inside, "scheduled_ts"].dropna()
        offered = inside.sum() / span
        if len(due) > 1 and due.max() > due.min():
            offered = (len(due) - 1) / (due.max() - due.min()) + (inside.sum() - len(due)) / span
        assert entry["rates"]["offered_rps"] == pytest.approx(offered)
        assert entry["rates"]["output_tokens_per_s"] == pytest.approx(
            ok["output_tokens"].sum() / span)
        good = ok[ok["ttft_ms"] <= 400.0]
        assert entry["good"] == len(good)
        assert entry["rates"]["goodput_rps"] == pytest.approx(len(good) / span)
        for metric in ("ttft_ms", "e2e_ms", "tpot_ms", "ttft_from_schedule_ms"):
            values = ok[metric].dropna().to_numpy()
            figures = entry["metrics"][metric]
            assert figures["n"] == values.size
            assert figures["mean"] == pytest.approx(values.mean())
            assert figures["max"] == pytest.approx(values.max())
            for name, q in PERCENTILES:
                assert figures[name] == pytest.approx(np.percentile(values, q)), (metric, name)
        itl = np.concatenate([np.asarray(gaps) for gaps in ok["itl_ms"]])
        assert entry["metrics"]["itl_ms"]["n"] == itl.size
        assert entry["metrics"]["itl_ms"]["p99"] == pytest.approx(np.percentile(itl, 99))
        per_user = 1000.0 / ok["tpot_ms"].dropna().to_numpy()
        figures = entry["metrics"]["output_tokens_per_s_per_user"]
        assert figures["n"] == per_user.size
        assert figures["p50"] == pytest.approx(np.median(per_user))
        assert "queue_wait_ms" not in entry["metrics"]  # no --max-concurrency
        assert entry["slo_met"] is None  # the run's --slo is judged over the whole run

    total = doc["total"]
    assert total["workload"] == "all" and total["requests"] == len(records)
    observed = np.percentile(records.loc[records["outcome"] == "ok", "ttft_ms"], 99)
    [objective] = doc["slo"]["objectives"]
    assert objective["observed_ms"] == pytest.approx(observed)
    assert objective["met"] is bool(observed <= 400.0)
    assert doc["slo"]["gate"] == ("met" if observed <= 400.0 else "missed")
    assert total["slo_met"] is objective["met"]


def test_a_workloads_own_objectives_judge_it(tmp_path: Path) -> None:
    run_dir = write_run(tmp_path, SyntheticRun(n_requests=300, slo={}))
    manifest = json.loads((run_dir / "manifest.json").read_text())
    manifest["workload_slo"] = {"chat": {"ttft_p50_ms": 1e6}, "summarise": {"ttft_p50_ms": 1.0}}
    (run_dir / "manifest.json").write_text(json.dumps(manifest))
    doc = read_summary(write_summary(run_dir).parent)
    verdicts = {w["workload"]: w["slo_met"] for w in doc["workloads"]}
    assert verdicts == {"chat": True, "summarise": False}
    assert doc["slo"]["gate"] == "none" and doc["total"]["slo_met"] is None


def test_a_run_without_answers_writes_null_not_nan(tmp_path: Path) -> None:
    _run_dir, doc = written(tmp_path, error_rate=1.0, slo={"ttft_p99_ms": 5.0})
    total = doc["total"]
    assert total["ok"] == 0 and total["requests"] == 600
    assert total["metrics"]["ttft_ms"]["n"] == 0
    assert total["metrics"]["ttft_ms"]["p99"] is None
    assert doc["slo"]["objectives"][0]["observed_ms"] is None
    assert doc["slo"]["gate"] == "no data"


# --- the schema page lists exactly the keys the code writes ----------------------------
def is_distribution(value: Any) -> bool:
    return isinstance(value, dict) and tuple(value) == DISTRIBUTION_FIELDS


def key_paths(value: Any, prefix: str = "", *, leaf: Any = None) -> set[str]:
    """Every key path of `value` that holds a value, a list or a named-keys part
    (`run.load.mode`, `slo.objectives`, `slo.objectives[].met`, `metrics`); a dict for
    which `leaf(dict)` holds ends its path, a named key stands as its placeholder."""
    if isinstance(value, dict) and not (leaf and leaf(value)):
        paths = set()
        for key, item in value.items():
            name = NAMED_KEYS.get(prefix.rsplit(".", 1)[-1]) or key
            path = f"{prefix}.{name}" if prefix else name
            nested = isinstance(item, dict) and not (leaf and leaf(item))
            if not nested or key in NAMED_KEYS:  # a plain grouping is not a key of its own
                paths.add(path)
            paths |= key_paths(item, path, leaf=leaf)
        return paths
    if isinstance(value, list) and value and isinstance(value[0], dict):
        return set().union(*(key_paths(item, prefix + "[]", leaf=leaf) for item in value))
    return set()


def documented(section: str) -> set[str]:
    """The keys in the first column of the table under `## <section>`."""
    text = DOC.read_text(encoding="utf-8")
    body = text.split(f"\n## {section}\n", 1)[1].split("\n## ", 1)[0]
    return set(re.findall(r"^\| `([^`]+)` \|", body, flags=re.MULTILINE))


def test_the_schema_page_lists_every_key(tmp_path: Path) -> None:
    _run_dir, doc = written(tmp_path, slo={"ttft_p99_ms": 400.0})
    workload_keys = {"workload", "requests", "rates"}  # what marks a workload object

    def top_leaf(d: dict[str, Any]) -> bool:
        return is_distribution(d) or workload_keys <= d.keys()

    top = key_paths(doc, leaf=top_leaf) - {"workloads[]"}
    assert top | {"workloads"} == documented("Top level")
    inner = key_paths(doc["workloads"][0], leaf=is_distribution)
    assert inner | key_paths(doc["total"], leaf=is_distribution) == documented(
        "A workload object")
    assert set(DISTRIBUTION_FIELDS) == documented("A distribution")
    assert set(SUMMARISED) == documented("Metrics")
    # and every key the page names is one the code writes
    assert {k for w in doc["workloads"] for k in w["metrics"]} <= set(SUMMARISED)
    assert not math.isnan(doc["window"]["duration_s"])


def test_energy_is_recomputed_from_the_power_samples(tmp_path: Path) -> None:
    """The synthetic run's GPUs report power only (no energy counter): summary.json's
    energy is the trapezoid of each GPU's power over the window, recomputed here, and it
    is measured (NVML on this machine), not modelled."""
    run_dir, doc = written(tmp_path)
    energy = doc["energy"]
    telemetry = pd.read_parquet(run_dir / "telemetry.parquet")
    power = telemetry[telemetry["metric"].astype(str) == "gpu_power_w"]
    start = doc["window"]["start_ts"]
    end = start + doc["window"]["duration_s"]
    total_w = 0.0
    for _, lane in power.groupby(power["labels"].astype(str)):
        lane = lane.sort_values("ts")
        ts, watts = lane["ts"].to_numpy(), lane["value"].to_numpy()
        lo, hi = max(start, ts[0]), min(end, ts[-1])
        # joules from the first sample to each (trapezoids), read at the window's edges
        # by linear interpolation between the samples either side (docs: the method)
        used = np.concatenate(([0.0], np.cumsum(np.diff(ts) * (watts[1:] + watts[:-1]) / 2)))
        total_w += float(np.interp(hi, ts, used) - np.interp(lo, ts, used)) / (hi - lo)
    assert energy["modelled"] is False and energy["method"] == "integrated power samples"
    assert energy["mean_power_w"] == pytest.approx(total_w, rel=1e-6)
    assert energy["energy_j"] == pytest.approx(total_w * (end - start), rel=1e-6)
    records = pd.read_parquet(run_dir / "requests.parquet")
    carried = records[(records["outcome"] == "ok") & (records["end_ts"] >= start)
                      & (records["end_ts"] <= end)]
    assert energy["j_per_token_generated"] == pytest.approx(
        energy["energy_j"] / carried["output_tokens"].sum(), rel=1e-9)


@pytest.mark.parametrize("cpu_peak", [35.0, 97.0])
def test_every_headline_figure_is_its_definition(tmp_path: Path, cpu_peak: float) -> None:
    """The figures five mutations of summary_document.py changed unseen (error % ÷ 100,
    the good share inverted, the window's end at its start, users taken from the rate,
    fidelity forced ok), each recomputed here from requests.parquet, the manifest and the
    telemetry, on a run with errors, an SLO and, in one case, a client that ran hot."""
    run_dir = write_run(tmp_path, SyntheticRun(n_requests=600, error_rate=0.08,
                                               slo={"ttft_p99_ms": 400.0}))
    if cpu_peak > 90:  # one loadgen CPU sample over the 90 % limit
        telemetry = pd.read_parquet(run_dir / "telemetry.parquet")
        cpu = telemetry.index[telemetry["metric"].astype(str) == "loadgen_cpu_pct"]
        telemetry.loc[cpu[len(cpu) // 2], "value"] = cpu_peak
        telemetry.to_parquet(run_dir / "telemetry.parquet")
    doc = json.loads(write_summary(run_dir).read_text())
    manifest = json.loads((run_dir / "manifest.json").read_text())
    records = pd.read_parquet(run_dir / "requests.parquet")

    for entry in [*doc["workloads"], doc["total"]]:
        mine = records if entry["workload"] == "all" else \
            records[records["workload"] == entry["workload"]]
        failed = int((mine["outcome"] != "ok").sum())
        assert failed > 0
        assert entry["error_pct"] == pytest.approx(100.0 * failed / len(mine))
        ok = mine[mine["outcome"] == "ok"]
        good = int((ok["ttft_ms"] <= 400.0).sum())
        assert entry["good"] == good
        assert entry["good_fraction"] == pytest.approx(good / len(mine))

    arrival = records["scheduled_ts"].fillna(records["sent_ts"])
    span = records["end_ts"].max() - arrival.min()
    # epoch seconds: a relative tolerance would allow half an hour
    assert doc["window"]["start_ts"] == pytest.approx(arrival.min(), rel=0, abs=1e-6)
    assert doc["window"]["end_ts"] == pytest.approx(arrival.min() + span, rel=0, abs=1e-6)
    assert doc["run"]["load"]["users"] == manifest["load"]["users"] == 20
    assert doc["run"]["load"]["rate_rps"] == manifest["load"]["rate_rps"] == 25.0

    telemetry = pd.read_parquet(run_dir / "telemetry.parquet")
    metric = telemetry["metric"].astype(str)
    lag = records.loc[records["outcome"] == "ok", "schedule_lag_ms"].dropna()
    fine = (np.percentile(lag, 99) <= 10.0
            and telemetry.loc[metric == "loadgen_cpu_pct", "value"].max() <= 90.0
            and np.percentile(telemetry.loc[metric == "loadgen_loop_lag_ms", "value"], 99)
            <= 10.0)
    assert doc["client_fidelity"]["ok"] is bool(fine) is (cpu_peak <= 90)
