"""`zerohop run --compare-layer` in one interleaved run: each request sent at random to
the engine or through the layer, both arms' records in one folder, the layer priced
from their difference; the routing comparison over two replicas; clashing flags."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli_fork import ForkedZerohop
from tests.main_job.test_run_command import assert_one_line_error, zerohop

FLOOD = ("kind: short_query_flood\nname: flood\ninput_tokens: 32\nmax_tokens: 8\n"
         "load: {kind: closed, users: 2}\n")


@pytest.mark.integration
@pytest.mark.alone  # timing-sensitive: CI runs it with no test beside it
def test_interleaved_compare_layer_prices_a_5ms_layer_in_one_run(tmp_path: Path) -> None:
    """As the sequential test (tests/main_job/test_run_command.py), the same allowance:
    the layer's own `Server-Timing` time, less 0.5 ms, to it plus 3 ms of hop."""
    import pandas as pd

    from zerohop.analysis.server_timing import server_timing_ms

    wl = tmp_path / "flood.yaml"
    wl.write_text(FLOOD)
    res = zerohop("run", "--compare-layer", "--layer-args", "--per-request-ms 5",
                  "--workload", str(wl), "--only", "ShortQueryFlood", "--duration", "15s",
                  "--results-dir", str(tmp_path), "--name", "layer", timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "layer cost" in res.stdout and "one interleaved run" in res.stdout
    runs = [d for d in tmp_path.iterdir() if d.is_dir()]
    assert len(runs) == 1  # one run, both arms
    budget = json.loads(next(tmp_path.glob("compare-*.json")).read_text())
    assert budget["mode"] == "interleaved" and budget["arm"] == "layer"
    records = pd.read_parquet(runs[0] / "requests.parquet")
    counts = records.arm.value_counts()
    assert set(counts.index) == {"direct", "layer"}
    assert abs(counts["direct"] - counts["layer"]) <= 2  # blocked: balanced as it goes
    manifest = json.loads((runs[0] / "manifest.json").read_text())
    assert [a["arm"] for a in manifest["target"]["arms"]] == ["direct", "layer"]
    layered = records[(records.arm == "layer") & (records.outcome == "ok")]
    direct = records[(records.arm == "direct") & (records.outcome == "ok")]
    assert direct.server_timing.isna().all()  # the direct arm never met the layer
    spent = [server_timing_ms(v, "layer") for v in layered.server_timing]
    assert spent and None not in spent, layered.server_timing.head()
    layer_p50 = float(pd.Series(spent).median())
    assert layer_p50 >= 5.0  # the layer really waited its 5 ms
    _the_budget_prices_the_hop_per_arm(runs[0], float(pd.Series(spent).mean()))
    ttft_p50 = budget["layer_cost_ms"]["ttft_ms"]["p50"]
    assert layer_p50 - 0.5 <= ttft_p50 <= layer_p50 + 3.0, (layer_p50, budget)
    low, _high = budget["ci95_ms"]["ttft_ms"]["p50"]
    assert low > 3.0  # clearly a cost, not noise
    assert (tmp_path / (next(tmp_path.glob("compare-*.json")).stem + ".html")).is_file()


def _the_budget_prices_the_hop_per_arm(run_dir: Path, layer_mean_ms: float) -> None:
    """The time budget's hop on the layer's arm is the layer's own time (about 5 ms), not
    half of it pooled with the direct arm; the direct arm has none."""
    from zerohop.analysis.server.time_budget import time_budget
    from zerohop.storage.run_reader import load_run

    run = load_run(run_dir)
    budget = time_budget(run.requests, run.telemetry)
    assert {w.arm for w in budget.workloads} == {"direct", "layer"}
    for workload in budget.workloads:
        for band in workload.bands:
            hop = band.part("hop")
            if workload.arm == "direct":
                assert hop is None
            else:
                assert hop is not None and 5.0 <= hop.mean_ms <= layer_mean_ms + 3.0, band


@pytest.mark.integration
def test_routing_comparison_over_two_replicas(tmp_path: Path) -> None:
    """Direct to one replica, and a round-robin and a prefix-affinity layer over both,
    as three arms of one run; each arm's cache hit rate, goodput and routes."""
    res = zerohop("run", "--compare-layer", "--replicas", "2", "--route", "round_robin",
                  "--route", "prefix_affinity", "--layer-args", "--per-request-ms 1",
                  "--workload", "workloads/shared_prefix.yaml", "--users", "3",
                  "--duration", "12s", "--results-dir", str(tmp_path), "--name", "routes",
                  timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    budget = json.loads(next(tmp_path.glob("compare-*.json")).read_text())
    arms = budget["arms"]
    assert list(arms) == ["direct", "round_robin", "prefix_affinity"]
    assert set(budget["costs"]) == {"round_robin", "prefix_affinity"}
    assert arms["direct"]["routes"] == {}  # straight to the first replica
    rr = arms["round_robin"]["routes"]
    assert set(rr) == {"r0", "r1"} and abs(rr["r0"] - rr["r1"]) <= 1  # its own turns
    assert set(arms["prefix_affinity"]["routes"]) <= {"r0", "r1"}
    for figures in arms.values():
        assert figures["ok"] > 20
        assert figures["cache_hit_pct"] is not None and figures["cache_hit_pct"] > 0
        assert figures["good_pct"] > 0


@pytest.mark.integration  # runs `zerohop run` as a child process
@pytest.mark.parametrize("args, words", [
    (["--replicas", "2"], ["--compare-layer"]),
    (["--route", "round_robin"], ["--compare-layer"]),
    (["--compare-layer", "--replicas", "0"], ["--replicas"]),
    (["--compare-layer", "--replicas", "2", "--host", "http://127.0.0.1:9"], ["--host"]),
    (["--compare-layer", "--host", "http://127.0.0.1:9", "--layer-url", "http://127.0.0.1:8",
      "--route", "round_robin"], ["--layer-url"]),
    (["--compare-layer", "--route", "round_robin", "--route", "round_robin"], ["once"]),
    (["--compare-layer", "--compare-layer-mode", "sequential", "--route", "round_robin",
      "--route", "least_loaded"], ["sequential"]),
    (["--compare-layer", "--route", "fastest"], ["--route"]),
    (["--control"], ["--compare-layer"]),
    (["--compare-layer", "--host", "http://127.0.0.1:9", "--layer-url", "a=http://127.0.0.1:8",
      "--layer-url", "a=http://127.0.0.1:7"], ["--layer-url", "twice"]),
    (["--compare-layer", "--host", "http://127.0.0.1:9", "--layer-url", "control=http://x:8"],
     ["--layer-url", "control"]),
    (["--compare-layer", "--host", "http://127.0.0.1:9", "--layer-url", "r=ftp://x:8"],
     ["--layer-url", "http"]),
    (["--compare-layer", "--compare-layer-mode", "sequential", "--host", "http://127.0.0.1:9",
      "--layer-url", "http://127.0.0.1:8", "--control"], ["sequential"]),
])
def test_clashing_compare_layer_flags_exit_2(args: list[str], words: list[str], tmp_path: Path,
                                             forked_zerohop: ForkedZerohop) -> None:
    """Run as a child process forked from one preloaded `zerohop` (tests/cli_fork.py)."""
    res = forked_zerohop.run(["run", "--results-dir", str(tmp_path), *args], timeout=60)
    assert_one_line_error(res, 2, *words)
    assert not any(tmp_path.iterdir())


@pytest.mark.integration
def test_a_comparison_without_a_load_flag_is_one_user(tmp_path: Path,
                                                      forked_zerohop: ForkedZerohop) -> None:
    """README: a comparison without --users or --rate runs one user. On the default
    workloads (two of which are open-loop or a trace on their own) that is one request in
    flight over the whole run, recounted here from the records' send and end times; the
    workloads the one user did not run are named as sending nothing, and not judged."""
    import pandas as pd

    res = forked_zerohop.run(["run", "--compare-layer", "--requests", "40", "--telemetry",
                              "none", "--microbench", "off", "--no-report", "--results-dir",
                              str(tmp_path)], timeout=180)
    assert res.returncode == 0, res.stderr[-3000:]
    (run,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    frame = pd.read_parquet(run / "requests.parquet")
    edges = sorted([(t, 1) for t in frame.sent_ts] + [(t, -1) for t in frame.end_ts],
                   key=lambda e: (e[0], e[1]))  # an end before a send at the same instant
    depth, deepest = 0, 0
    for _, step in edges:
        depth += step
        deepest = max(deepest, depth)
    assert deepest == 1, deepest
    manifest = json.loads((run / "manifest.json").read_text())
    started = manifest["workload_selection"]["names"]
    silent = [name for name in started if name not in set(frame.workload)]
    assert len(started) == 4 and len(silent) == 3, (started, set(frame.workload))
    summary = json.loads((run / "summary.json").read_text())
    assert (summary["run"]["load"]["mode"], summary["run"]["load"]["users"]) == ("closed", 1)
    assert summary["run"]["sent_nothing"] == silent
    judged = {o["workload"] for o in summary["slo"]["objectives"]}
    assert not judged & set(silent), judged
    assert (f"sent nothing, not judged: {', '.join(silent)}: Locust spread 1 user over 4 "
            "workloads by weight") in res.stdout
    assert "no data" not in res.stdout
