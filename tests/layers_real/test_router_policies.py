"""vllm-router's policies as arms of one run over two replicas with the shared-prefix
workload — round_robin, power_of_two, cache_aware (one router process each) — beside
zerohop's own `prefix_affinity` layer: per arm the prefix-cache hit rate, TTFT cost per
percentile, goodput and which replica served each request.

The arms share the replicas (their caches and queues), so this compares policies under
one mixed load (docs/layer.md, "Comparing routing policies")."""

from __future__ import annotations

import json
from pathlib import Path

from tests.main_job.test_run_command import zerohop
from tests.real_layers import start_vllm_router

POLICIES = ("round_robin", "power_of_two", "cache_aware")


def test_router_policies_and_prefix_affinity_as_arms(
        tmp_path: Path, vllm_router_bin: str, replicas: list[str]) -> None:
    from zerohop.sim.launcher import start_proxy

    routers = []
    affinity = start_proxy(replicas, ["--route", "prefix_affinity"])
    try:
        for policy in POLICIES:
            routers.append(start_vllm_router(replicas, policy, tmp_path))
        arms = [a for policy, router in zip(POLICIES, routers, strict=True)
                for a in ("--layer-url", f"{policy}={router.url}")]
        res = zerohop("run", "--host", replicas[0], "--compare-layer", *arms,
                      "--layer-url", f"prefix_affinity={affinity.url}",
                      "--workload", "workloads/shared_prefix.yaml", "--users", "4",
                      "--duration", "15s", "--results-dir", str(tmp_path), "--name", "policies",
                      "--no-report", timeout=300)
    finally:
        for router in routers:
            router.stop()
        affinity.stop()
    assert res.returncode == 0, res.stderr[-3000:]
    budget = json.loads(next(tmp_path.glob("compare-*.json")).read_text())
    arms = budget["arms"]
    print(json.dumps({a: {k: f[k] for k in ("requests", "cache_hit_pct", "goodput_rps",
                                            "replicas")} for a, f in arms.items()}, indent=1))
    assert list(arms) == ["direct", *POLICIES, "prefix_affinity"]
    names = {u.split("://", 1)[1] for u in replicas}
    for arm in (*POLICIES, "prefix_affinity"):
        figures = arms[arm]
        assert figures["ok"] > 0 and figures["cache_hit_pct"] is not None, (arm, figures)
        assert set(figures["replicas"]) <= names and figures["replicas"], (arm, figures)
        assert sum(figures["replicas"].values()) >= figures["ok"]  # each answer named
        assert set(budget["costs"][arm]["layer_cost_ms"]["ttft_ms"]) >= {"p50", "p99"}
    rr = arms["round_robin"]["replicas"]
    assert set(rr) == names and max(rr.values()) - min(rr.values()) <= 2, rr  # by turns
    assert set(arms["prefix_affinity"]["routes"]) <= {"r0", "r1"}
