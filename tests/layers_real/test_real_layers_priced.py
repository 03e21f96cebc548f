"""vllm-router and nginx priced per percentile in one interleaved run, against two
embedded replicas, beside zerohop's own 0 ms pass-through (the control); which replica
served each request, as the replica named itself."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd

from tests.main_job.test_run_command import zerohop
from tests.real_layers import read_prometheus, start_nginx, start_vllm_router

FLOOD = ("kind: short_query_flood\nname: flood\ninput_tokens: 32\nmax_tokens: 4\n"
         "load: {kind: closed, users: 4}\n")
STATS = ("p50", "p90", "p99")


def test_vllm_router_and_nginx_priced_beside_the_control(
        tmp_path: Path, vllm_router_bin: str, nginx_bin: str, replicas: list[str]) -> None:
    wl = tmp_path / "flood.yaml"
    wl.write_text(FLOOD)
    with start_vllm_router(replicas, "round_robin", tmp_path) as router, \
            start_nginx(replicas, tmp_path, mode="stream") as nginx:
        before = read_prometheus(router.metrics_url or "")
        res = zerohop("run", "--host", replicas[0], "--compare-layer", "--control",
                      "--layer-url", f"vllm-router={router.url}",
                      "--layer-url", f"nginx={nginx.url}",
                      "--workload", str(wl), "--only", "ShortQueryFlood", "--duration", "20s",
                      "--results-dir", str(tmp_path), "--name", "real", timeout=300)
        after = read_prometheus(router.metrics_url or "")
    assert res.returncode == 0, res.stderr[-3000:]
    budget = json.loads(next(tmp_path.glob("compare-*.json")).read_text())
    assert set(budget["costs"]) == {"control", "vllm-router", "nginx"}
    assert set(budget["net_of_control"]) == {"vllm-router", "nginx"}
    for arm, cost in budget["costs"].items():
        for stat in STATS:  # each layer's cost per percentile, with its interval, printed
            value = cost["layer_cost_ms"]["ttft_ms"][stat]
            low, high = cost["ci95_ms"]["ttft_ms"][stat]
            assert math.isfinite(value) and low <= value <= high, (arm, stat, cost)
            assert f"{stat} {value:+.2f} [{low:+.2f}, {high:+.2f}]" in res.stdout
    # the route distribution, as each replica named itself (x-zerohop-replica)
    served = {arm: f["replicas"] for arm, f in budget["arms"].items()}
    assert served["direct"].keys() == served["control"].keys() == {_address(replicas[0])}
    for arm in ("vllm-router", "nginx"):
        assert served[arm].keys() == {_address(u) for u in replicas}, served
        counts = list(served[arm].values())
        assert max(counts) - min(counts) <= 2, served  # both balance by turns
    records = pd.read_parquet(next(tmp_path.glob("*/requests.parquet")))
    ok = records[records.outcome == "ok"]
    assert ok.replica.notna().all()  # every answer says who gave it
    assert "served by" in res.stdout
    print(res.stdout)
    # what the router counted is what the client sent through it
    through_router = int((records.arm == "vllm-router").sum())
    assert _router_requests(after) - _router_requests(before) >= through_router


def _address(url: str) -> str:
    return url.split("://", 1)[1].rstrip("/")


def _router_requests(metrics: dict[str, float]) -> float:
    """Requests the router says it handled on /v1/chat/completions."""
    return sum(v for k, v in metrics.items()
               if k.startswith("vllm_router_requests_total") and "chat" in k)
