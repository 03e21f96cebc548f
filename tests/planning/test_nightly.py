from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.planning.fakes import write_fake_run
from zerohop.cli import cli
from zerohop.planning.nightly import NightlyConfig, load_config, read_history, run_nightly
from zerohop.runner.plan import RunPlan
from zerohop.runner.run_once import RunResult

pytestmark = pytest.mark.unit


def fake_target(tpot_ms: float = 20.0, counter: itertools.count | None = None
                ) -> Callable[[RunPlan], RunResult]:
    """Every call is a new sample: same workload, fresh noise (a new seed)."""
    seeds = counter or itertools.count(1)

    def runner(plan: RunPlan) -> RunResult:
        seed = next(seeds)
        run_dir = write_fake_run(plan.results_dir, f"{plan.name}-{seed}", rate_rps=10,
                                 duration_s=15, tpot_ms=tpot_ms, seed=seed)
        return RunResult(run_dir, 0, None)

    return runner


def config(**changes: object) -> NightlyConfig:
    data: dict[str, object] = {"name": "ci", "samples": 3,
                               "load": {"rate": 10, "duration_s": 15}}
    data.update(changes)
    return NightlyConfig.model_validate(data)


def test_unchanged_reruns_never_regress_and_slower_decode_does(tmp_path: Path) -> None:
    seeds = itertools.count(1)
    first = run_nightly(config(), tmp_path, runner=fake_target(counter=seeds))
    assert first.entry["status"] == "baseline" and first.exit_code == 0
    for _ in range(5):
        rerun = run_nightly(config(), tmp_path, runner=fake_target(counter=seeds))
        assert rerun.entry["status"] == "pass", rerun.entry["gates"]  # never "improved"
        assert rerun.exit_code == 0
    slow = run_nightly(config(), tmp_path, runner=fake_target(tpot_ms=23.0, counter=seeds))
    assert slow.exit_code == 1
    assert slow.entry["status"] == "regression"
    assert "tpot_ms p50" in slow.entry["regressions"]
    tpot = next(g for g in slow.entry["gates"] if g["metric"] == "tpot_ms" and g["stat"] == "p50")
    assert tpot["delta_pct"] == pytest.approx(15.0, abs=3.0)
    history = read_history(tmp_path)
    assert len(history) == 7
    assert all(e["baseline_id"] == first.entry["id"] for e in history[1:])
    page = (tmp_path / "latest.html").read_text()
    assert "REGRESSION" in page and "chart-trend-tpot_ms" in page
    assert (tmp_path / "runs" / slow.entry["id"] / "compare.html").is_file()


def test_run_level_noise_band_absorbs_a_shift_the_bootstrap_calls_significant(
    tmp_path: Path,
) -> None:
    # samples alternate 20 / 21.6 ms: an 8 % jump between runs of the same target
    seeds = itertools.count(1)
    flaky = itertools.cycle([20.0, 21.6, 20.0])

    def runner(plan: RunPlan) -> RunResult:
        seed = next(seeds)
        return RunResult(write_fake_run(plan.results_dir, f"{plan.name}-{seed}", rate_rps=10,
                                        duration_s=15, tpot_ms=next(flaky), seed=seed), 0, None)

    run_nightly(config(), tmp_path, runner=runner)
    again = run_nightly(config(), tmp_path, runner=runner)  # 21.6, 20, 21.6: +~5 % pooled
    gate = next(g for g in again.entry["gates"] if g["metric"] == "tpot_ms" and g["stat"] == "p50")
    assert gate["noise_band"] > 1.0
    assert gate["verdict"] == "within noise"
    assert again.exit_code == 0


def samples_at(tpots_ms: list[float], seeds: itertools.count) -> Callable[[RunPlan], RunResult]:
    """One sample per call, each at the next of `tpots_ms` (and a fresh seed)."""
    tpots = iter(tpots_ms)

    def runner(plan: RunPlan) -> RunResult:
        seed = next(seeds)
        return RunResult(write_fake_run(plan.results_dir, f"{plan.name}-{seed}", rate_rps=10,
                                        duration_s=15, tpot_ms=next(tpots), seed=seed), 0, None)

    return runner


@pytest.mark.parametrize(("baseline", "rerun", "bootstrap"), [
    # the baseline's TPOT p50 samples span 20-21.6 ms (band 1.6): a rerun anywhere in
    # 18.4-23.2 ms is where the baseline's own samples fall, give or take the band
    ([20.0, 20.0, 21.6], [22.4, 22.4, 22.4], "worse"),  # pooled +2.1 ms, +10 %
    ([20.0, 21.6, 21.6], [19.0, 19.0, 19.0], "better"),  # pooled -2.2 ms, -10 %
])
def test_a_rerun_whose_samples_stay_in_the_noise_band_is_only_within_noise(
    tmp_path: Path, baseline: list[float], rerun: list[float], bootstrap: str,
) -> None:
    # The pooled delta clears the bootstrap, the 5 % threshold and the band itself; the
    # samples do not leave the band, so it is neither a regression nor an improvement.
    seeds = itertools.count(1)
    run_nightly(config(), tmp_path, runner=samples_at(baseline, seeds))
    again = run_nightly(config(), tmp_path, runner=samples_at(rerun, seeds))
    gate = next(g for g in again.entry["gates"] if g["metric"] == "tpot_ms" and g["stat"] == "p50")
    assert gate["bootstrap_verdict"] == bootstrap, gate  # what the pooled samples alone say
    assert abs(gate["delta"]) > gate["noise_band"], gate
    assert gate["verdict"] == "within noise", gate
    assert again.entry["status"] == "pass", again.entry["gates"]
    assert again.exit_code == 0


def test_set_baseline_and_latest_good(tmp_path: Path) -> None:
    seeds = itertools.count(1)
    run_nightly(config(), tmp_path, runner=fake_target(counter=seeds))
    marked = run_nightly(config(), tmp_path, runner=fake_target(tpot_ms=30, counter=seeds),
                         set_baseline=True)
    assert marked.entry["status"] == "baseline"
    nxt = run_nightly(config(), tmp_path, runner=fake_target(tpot_ms=30, counter=seeds))
    assert nxt.entry["baseline_id"] == marked.entry["id"] and nxt.exit_code == 0
    good = config(compare={"baseline": "latest-good"})
    regress = run_nightly(good, tmp_path, runner=fake_target(tpot_ms=40, counter=seeds))
    assert regress.exit_code == 1
    # the regression is never a baseline for latest-good
    after = run_nightly(good, tmp_path, runner=fake_target(tpot_ms=30, counter=seeds))
    assert after.entry["baseline_id"] == nxt.entry["id"]


def test_config_validation(tmp_path: Path) -> None:
    path = tmp_path / "n.yaml"
    path.write_text("name: x\nsamples: 1\n")
    with pytest.raises(ValueError, match="samples"):
        load_config(path)
    path.write_text("name: x\nload: {rate: 2, users: 3}\n")
    with pytest.raises(ValueError, match="exclusive"):
        load_config(path)
    path.write_text("name: x\nload: {workloads: [nope.yaml]}\n")
    with pytest.raises(ValueError, match=r"load.workloads: .*nope.yaml not found"):
        load_config(path)


@pytest.mark.parametrize(
    ("text", "field"),
    [("name: x\nsurprise: 1\n", "surprise"),
     ("name: x\ncompare: {threshold: loose}\n", "compare.threshold"),
     ("name: x\ncompare: {baseline: 0007-nope}\n", "compare.baseline"),
     ("name: x\nload: {only: [Nope]}\n", "load.only")],
)
def test_bad_config_exits_2_naming_the_field(tmp_path: Path, text: str, field: str) -> None:
    path = tmp_path / "n.yaml"
    path.write_text(text)
    result = CliRunner().invoke(cli, ["nightly", "--config", str(path), "--history",
                                      str(tmp_path / "h")])
    assert result.exit_code == 2, result.output
    assert field in result.output and "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_history_lines_are_json(tmp_path: Path) -> None:
    run_nightly(config(), tmp_path, runner=fake_target())
    lines = (tmp_path / "history.jsonl").read_text().splitlines()
    entry = json.loads(lines[0])
    assert entry["figures"]["tpot_ms"]["n"] > 0
    assert len(entry["figures"]["tpot_ms"]["sample_p50"]) == 3


def test_the_console_line_of_a_gate_is_rounded_for_people() -> None:
    from zerohop.planning.nightly import gate_line

    gate = {"metric": "ttft_ms", "stat": "p99", "base": 9.011542500000001,
            "candidate": 12.640808, "noise_band": 0.08737999999999957, "verdict": "worse"}
    assert gate_line(gate) == "ttft_ms p99: 9.01 → 12.6 ms (noise band 0.087 ms) — worse"


@pytest.mark.unit
def test_the_profile_readme_names_is_shipped_and_loads() -> None:
    """README's `zerohop nightly --config nightly.yaml` runs from a fresh clone: the file
    is there, strict-valid, its workloads resolve, and the example job uses it too."""
    repo = Path(__file__).resolve().parents[2]
    assert "--config nightly.yaml" in (repo / "README.md").read_text()
    config = load_config(repo / "nightly.yaml")
    assert config.samples == 3 and config.microbench == "auto" and config.load.rate == 10
    for workload in config.load.workloads:
        assert Path(workload).is_file(), workload
    workflow = (repo / ".github" / "workflows" / "nightly-perf.yml").read_text()
    assert "--config nightly.yaml" in workflow and "cat > nightly.yaml" not in workflow


@pytest.mark.unit
def test_history_figures_follow_the_one_n_rule(make_run: Callable[..., Path]) -> None:
    """The history's percentiles, as the report prints them: a p99 of 60 requests is
    their largest value, so it is null (p99 needs 100); p50 is the plain median of the
    ok TTFTs (numpy's linear quantile), recomputed here from the records."""
    import numpy as np
    import pandas as pd

    from zerohop.planning.nightly_gates import Samples, sample_figures

    run = make_run(n_requests=60, duration_s=10.0, name="sixty")
    samples = Samples.load([run], "candidate", pooled_summary=True)
    figures = sample_figures(samples, ["ttft_ms"])["ttft_ms"]
    records = pd.read_parquet(run / "requests.parquet")
    ttft = records.loc[records.outcome == "ok", "ttft_ms"].dropna().to_numpy()
    assert figures["n"] == len(ttft) < 100
    assert figures["p99"] is None and figures["p90"] is not None  # p90 needs 10
    assert figures["p50"] == pytest.approx(float(np.quantile(ttft, 0.5)))


def test_pooled_samples_hold_every_record_with_the_categories_they_use() -> None:
    """`pool_runs` joins categorical columns without turning them into strings: the
    values one after another, the used categories sorted (as a categorical built from
    the values would hold them), whatever each sample's own category order; one
    sample is pooled as it is."""
    import numpy as np
    import pandas as pd

    from zerohop.analysis.itl_column import ItlColumn
    from zerohop.analysis.run_data import RunData
    from zerohop.planning.nightly_gates import pool_runs

    def run(workloads: list[str | None], categories: list[str], gaps: list[float]) -> RunData:
        frame = pd.DataFrame({
            "workload": pd.Categorical(workloads, categories=categories),
            "ttft_ms": np.arange(len(workloads), dtype=float),
        })
        offsets = np.arange(len(workloads) + 1, dtype=np.int64)
        return RunData(run_dir=Path("run"), manifest={"run_id": "r", "load": {}},
                       requests=frame, itl=ItlColumn(np.array(gaps), offsets),
                       telemetry=pd.DataFrame(), microbench=None,
                       requests_source="parquet")

    first = run(["rag", "chat", None], ["rag", "unused", "chat"], [1.0, 2.0, 3.0])
    second = run(["zeta", "chat"], ["zeta", "chat"], [4.0, 5.0])
    pooled = pool_runs([first, second], "candidate")
    workload = pooled.requests["workload"]
    assert list(workload.cat.categories) == ["chat", "rag", "zeta"]
    assert workload.astype(object).tolist() == ["rag", "chat", np.nan, "zeta", "chat"]
    assert pooled.requests["ttft_ms"].tolist() == [0.0, 1.0, 2.0, 0.0, 1.0]
    np.testing.assert_array_equal(pooled.itl.values, [1.0, 2.0, 3.0, 4.0, 5.0])
    assert "load" not in pooled.manifest and pooled.manifest["run_id"] == "candidate (2 samples)"
    alone = pool_runs([first], "baseline")
    assert list(alone.requests["workload"].cat.categories) == ["chat", "rag"]
    assert alone.itl is first.itl
    assert list(first.requests["workload"].cat.categories) == ["rag", "unused", "chat"]


def test_a_nightly_reads_and_summarises_each_sample_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each side's samples are read once and summarised once each, plus the candidate's
    pooled summary for the history: at ten million records a read or a summary is
    seconds (it read the candidate's samples twice and summarised them three times)."""
    from zerohop.planning import nightly_gates
    from zerohop.storage import run_reader

    reads: list[Path] = []
    summaries: list[str] = []
    load_run, summarise_run = run_reader.load_run, nightly_gates.summarise_run

    def counted_load(run_dir: Path, **kwargs: object) -> object:
        reads.append(Path(run_dir))
        return load_run(run_dir, **kwargs)  # type: ignore[arg-type]

    def counted_summary(run: object, *args: object, **kwargs: object) -> object:
        summaries.append(str(run.manifest.get("run_id")))  # type: ignore[attr-defined]
        return summarise_run(run, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(run_reader, "load_run", counted_load)
    monkeypatch.setattr(nightly_gates, "summarise_run", counted_summary)
    seeds = itertools.count(1)
    run_nightly(config(samples=2), tmp_path, runner=fake_target(counter=seeds))
    reads.clear()
    summaries.clear()
    second = run_nightly(config(samples=2), tmp_path, runner=fake_target(counter=seeds))
    assert second.entry["status"] == "pass"
    samples = [tmp_path / s for s in second.entry["samples"]]
    baseline = [tmp_path / s for s in read_history(tmp_path)[0]["samples"]]
    assert sorted(reads) == sorted(samples + baseline)  # each once
    assert len(summaries) == 5  # each sample, and the candidate's pooled
    assert summaries.count("candidate (2 samples)") == 1
