"""Print how fast the workload layer makes prompts, schedules and trace replays.

A script, not a test (pytest does not collect it): `python tests/workloads/bench_workloads.py`.
Figures on a shared machine are noisy; read them as orders of magnitude.
"""

from __future__ import annotations

import functools
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from zerohop.workloads.content.prompts import PromptBuilder, default_calibration
from zerohop.workloads.planners.request_plans import make_planner
from zerohop.workloads.timing.arrivals import ArrivalSchedule
from zerohop.workloads.timing.rate_curve import spike_rate
from zerohop.workloads.timing.traces import read_trace
from zerohop.workloads.yaml_io import parse_workloads

TRACES = Path(__file__).resolve().parents[2].parent / "shared" / "traces"


def main() -> None:
    builder = PromptBuilder()
    calibration = default_calibration("openai-chat", builder)
    rng = np.random.default_rng(0)
    for tokens in (128, 8192, 32768, 131072):
        ms = _median_ms(functools.partial(builder.build_for_tokens, tokens, rng, calibration))
        print(f"prompt of {tokens:>6} tokens: {ms:8.2f} ms (median of 7)")
    ms = _median_ms(lambda: default_calibration("openai-chat", builder))
    print(f"default calibration (3 probes counted): {ms:.1f} ms")

    schedule = ArrivalSchedule("gamma", spike_rate(100, peak_multiplier=4, at_s=60,
                                                   duration_s=60), seed=1, cv=2)
    started = time.perf_counter()
    count = len(schedule.offsets(600))
    elapsed = time.perf_counter() - started
    print(f"gamma+spike schedule: {count} arrivals in {elapsed * 1e3:.1f} ms "
          f"({elapsed / count * 1e6:.2f} µs each)")

    conv = TRACES / "AzureLLMInferenceTrace_conv.csv"
    if not conv.is_file():
        print(f"(no traces in {TRACES}: skipping trace figures)", file=sys.stderr)
        return
    for name in ("AzureLLMInferenceTrace_conv.csv", "conversation_trace.jsonl",
                 "ShareGPT_V3_filtered_500.json"):
        started = time.perf_counter()
        rows = read_trace(TRACES / name)
        print(f"read {name}: {len(rows)} rows in {(time.perf_counter() - started) * 1e3:.0f} ms")
    spec = parse_workloads({"kind": "trace_replay", "name": "azure", "trace": str(conv),
                            "speed": 10, "duration_s": 60}).workloads[0]
    trace = read_trace(conv)
    started = time.perf_counter()
    planned = list(make_planner(spec, seed=0, worker_index=0, worker_count=1,
                                trace_requests=trace).schedule())
    elapsed = time.perf_counter() - started
    print(f"plan Azure conv 10x/60 s: {len(planned)} requests with prompts in "
          f"{elapsed * 1e3:.0f} ms ({elapsed / len(planned) * 1e6:.0f} µs each)")


def _median_ms(call: Callable[[], object], repeats: int = 7) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        call()
        times.append((time.perf_counter() - started) * 1e3)
    return statistics.median(times)


if __name__ == "__main__":
    main()
