"""Certificate figures built in memory, shared by the certificate's tests."""

from __future__ import annotations

from zerohop.analysis.client.client_certificate import ClientCpu, Figures, LoadFacts
from zerohop.analysis.client.fidelity_check import ErrorStats, TimingErrors


def stats(p99_ms: float) -> ErrorStats:
    return ErrorStats(n=500, p50_ms=p99_ms / 4, p99_ms=p99_ms, max_ms=p99_ms * 2, min_ms=0.0)


def figures(*, ttft_p99: float = 0.3, lag_p99: float = 1.0, headroom: float = 80.0,
            cpu_us: float = 4000.0, requests: int = 500) -> Figures:
    timing = TimingErrors(requests, requests * 16, 300.0, stats(ttft_p99), stats(0.1),
                          stats(0.2), 0, ())
    cpu = ClientCpu((), 15.0, 20.0, cpu_us, headroom)
    return Figures(timing=timing, schedule_lag_p99_ms=lag_p99, cpu=cpu, achieved_rps=20.0)


OPEN = LoadFacts(mode="open", intended_rps=20.0, users=None, processes=1, duration_s=20.0,
                 warmup_s=2.0, client_cores=1)
