"""The certificate's arithmetic and verdict: CPU per request from the load generator's
own samples, the processes a load needs, and PASS only when every bound holds."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from tests.analysis.certificate_fixtures import OPEN, figures
from zerohop.analysis.client.client_certificate import (
    CERTIFICATE_SCHEMA,
    Bounds,
    certificate_document,
    certificate_view,
    client_cpu,
    judge,
    processes_needed,
    schedule_lag_p99_ms,
    workers_flag,
)

pytestmark = pytest.mark.unit

T0 = 1_700_000_000.0


def cpu_samples(source: str, pcts: list[float], start: float = T0) -> list[dict[str, object]]:
    return [{"ts": start + i, "source": source, "metric": "loadgen_cpu_pct", "labels": "{}",
             "value": v} for i, v in enumerate(pcts)]


def ended(rate_rps: float, seconds: float, start: float = T0) -> pd.DataFrame:
    n = int(rate_rps * seconds)
    return pd.DataFrame({"end_ts": start + (np.arange(n) + 0.5) / rate_rps})


@pytest.mark.parametrize("cpu_us, rate, expected", [
    (4000.0, 20.0, 1),      # 0.08 core: one process
    (4000.0, 200.0, 1),     # 0.8 core exactly: still one
    (4000.0, 201.0, 2),     # just over the 80 % budget
    (4000.0, 500.0, 3),     # 2.0 cores / 0.8 = 2.5 → 3
    (250.0, 10_000.0, 4),   # 2.5 cores / 0.8 = 3.125 → 4
    (math.nan, 20.0, 0),    # no CPU figure: unknown
])
def test_processes_needed_is_ceil_of_cpu_demand_over_80_percent_of_a_core(
        cpu_us: float, rate: float, expected: int) -> None:
    assert processes_needed(cpu_us, rate) == expected


def test_the_workers_flag() -> None:
    assert workers_flag(1) == "--workers 0"  # one process: Locust without workers
    assert workers_flag(3) == "--workers 3"


def test_cpu_per_request_from_the_processes_own_samples() -> None:
    telemetry = pd.DataFrame([
        *cpu_samples("loadgen:h:1", [0.0, 40.0, 40.0, 40.0, 40.0, 40.0]),
        *cpu_samples("loadgen:h:2", [0.0, 10.0, 10.0, 10.0, 10.0, 10.0]),
        {"ts": T0 + 2, "source": "loadgen:h:1", "metric": "loadgen_rss_bytes", "labels": "{}",
         "value": 1e9},
    ])
    cpu = client_cpu(telemetry, ended(100.0, 10.0), start_ts=T0, end_ts=T0 + 5,
                     client_cores=2)
    assert [p.source for p in cpu.processes] == ["loadgen:h:1", "loadgen:h:2"]
    assert cpu.processes[0].mean_pct == pytest.approx(40.0)
    assert cpu.processes[0].cpu_s == pytest.approx(2.0)
    assert cpu.window_s == pytest.approx(5.0)
    assert cpu.requests_per_s == pytest.approx(100.0)
    # 0.5 core for 100 req/s: 5 ms of CPU each
    assert cpu.cpu_us_per_request == pytest.approx(5000.0)
    assert cpu.headroom_pct == pytest.approx(60.0)  # the busiest process, at 40 %


def test_headroom_is_the_cores_share_when_processes_outnumber_cores() -> None:
    telemetry = pd.DataFrame([row for pid in (1, 2, 3)
                              for row in cpu_samples(f"loadgen:h:{pid}", [0.0, 60.0, 60.0])])
    cpu = client_cpu(telemetry, ended(10.0, 5.0), start_ts=T0, end_ts=T0 + 2, client_cores=2)
    assert cpu.headroom_pct == pytest.approx(100.0 - 90.0)  # 1.8 cores of 2


def test_samples_outside_the_window_do_not_count() -> None:
    telemetry = pd.DataFrame(cpu_samples("loadgen:h:1", [100.0, 100.0, 20.0, 20.0, 20.0]))
    cpu = client_cpu(telemetry, ended(10.0, 5.0), start_ts=T0 + 2, end_ts=T0 + 4,
                     client_cores=1)
    assert cpu.processes[0].mean_pct == pytest.approx(20.0)


def test_no_cpu_samples_give_nan_not_zero() -> None:
    cpu = client_cpu(pd.DataFrame(columns=["ts", "source", "metric", "labels", "value"]),
                     ended(10.0, 5.0), start_ts=T0, end_ts=T0 + 5, client_cores=1)
    assert cpu.processes == () and math.isnan(cpu.cpu_us_per_request)


def test_schedule_lag_p99_after_the_warmup() -> None:
    sent = T0 + np.arange(200) * 0.05
    lag = np.where(np.arange(200) < 20, 50.0, 1.0)  # the first second was late
    requests = pd.DataFrame({"sent_ts": sent, "schedule_lag_ms": lag})
    assert schedule_lag_p99_ms(requests, after_ts=T0 + 1.0) == pytest.approx(1.0)
    assert schedule_lag_p99_ms(requests, after_ts=T0 - 1) == pytest.approx(50.0)
    closed = requests.assign(schedule_lag_ms=math.nan)
    assert math.isnan(schedule_lag_p99_ms(closed, after_ts=T0))


def test_pass_when_every_bound_holds() -> None:
    verdict = judge(figures(), OPEN, Bounds(), machine_cpus=2)
    assert verdict.passed and verdict.reasons == ()
    assert verdict.processes_needed == 1
    assert "--workers 0" in verdict.recommendation


@pytest.mark.parametrize("change, reason", [
    ({"ttft_p99": 1.5}, "TTFT error p99 1.5 ms > 1 ms"),
    ({"lag_p99": 7.0}, "schedule lag p99 7 ms > 5 ms"),
    ({"headroom": 10.0}, "CPU headroom 10 % < 20 %"),
    ({"headroom": math.nan}, "no CPU telemetry"),
    ({"ttft_p99": math.nan}, "TTFT error p99 n/a"),
    ({"requests": 12}, "only 12 requests to judge"),
])
def test_fail_names_each_bound_missed(change: dict[str, float], reason: str) -> None:
    verdict = judge(figures(**change), OPEN, Bounds(), machine_cpus=2)  # type: ignore[arg-type]
    assert not verdict.passed
    assert any(r.startswith(reason) for r in verdict.reasons), verdict.reasons


def test_a_load_the_check_did_not_carry_is_not_certified() -> None:
    saturated = replace(OPEN, intended_rps=1000.0)  # 20 req/s achieved
    verdict = judge(figures(), saturated, Bounds(), machine_cpus=8)
    assert not verdict.passed
    assert verdict.reasons[0].startswith("only 20 of 1000 req/s asked completed")
    assert judge(figures(), replace(OPEN, intended_rps=24.0), Bounds(), machine_cpus=8).passed


def test_the_bound_on_the_ttft_error_is_the_users() -> None:
    assert not judge(figures(ttft_p99=0.3), OPEN, Bounds(max_ttft_error_ms=0.2),
                     machine_cpus=2).passed


def test_a_closed_loop_is_not_judged_on_schedule_lag() -> None:
    closed = replace(OPEN, mode="closed", intended_rps=None, users=50)
    assert judge(figures(lag_p99=math.nan), closed, Bounds(), machine_cpus=2).passed


def test_a_cpu_bound_fail_recommends_the_workers_the_load_needs() -> None:
    heavy = replace(OPEN, intended_rps=500.0)  # 4 ms × 500 req/s = 2 cores → 3 processes
    verdict = judge(figures(headroom=5.0), heavy, Bounds(), machine_cpus=8)
    assert verdict.processes_needed == 3
    assert verdict.recommendation.startswith("run with --workers 3")


def test_a_closed_loop_sizes_processes_at_the_rate_it_achieved() -> None:
    closed = replace(OPEN, mode="closed", intended_rps=None, users=50)
    verdict = judge(figures(cpu_us=100_000.0), closed, Bounds(), machine_cpus=8)
    assert verdict.processes_needed == 3  # 0.1 s × 20 req/s = 2 cores


def test_a_fail_with_enough_processes_blames_what_else_holds_the_client() -> None:
    verdict = judge(figures(ttft_p99=4.0), OPEN, Bounds(), machine_cpus=2)
    assert "the error is not the load's CPU demand" in verdict.recommendation


def test_a_load_larger_than_the_machine_says_so() -> None:
    heavy = replace(OPEN, intended_rps=5000.0)
    verdict = judge(figures(headroom=0.0), heavy, Bounds(), machine_cpus=2)
    assert "more than this machine's 2 CPUs" in verdict.recommendation


def test_the_document_holds_figures_bounds_verdict_and_machine() -> None:
    verdict = judge(figures(ttft_p99=2.0), OPEN, Bounds(), machine_cpus=2)
    doc = certificate_document(figures(ttft_p99=2.0), OPEN, Bounds(), verdict,
                               {"hostname": "h", "cpus": 2}, run_id="r1", created_at="now")
    assert doc["schema"] == CERTIFICATE_SCHEMA and doc["schema_version"] == 1
    assert set(doc) >= {"figures", "bounds", "verdict", "machine", "load"}
    assert doc["figures"]["ttft_error"]["p99_ms"] == 2.0
    assert doc["bounds"]["max_ttft_error_ms"] == 1.0 and doc["bounds"]["core_budget"] == 0.8
    assert doc["verdict"]["result"] == "FAIL"
    assert doc["verdict"]["workers_flag"] == "--workers 0"
    json.dumps(doc)  # plain JSON types only
    view = certificate_view(json.loads(json.dumps(doc)))
    assert view.result == "FAIL" and view.ttft_error_p99_ms == 2.0
    assert view.reasons == list(verdict.reasons)


def test_the_view_of_a_malformed_certificate_is_unknown_not_an_error() -> None:
    view = certificate_view({"figures": "x", "verdict": {"reasons": "not a list"}})
    assert view.result == "unknown" and math.isnan(view.ttft_error_p99_ms)
    assert view.reasons == []
