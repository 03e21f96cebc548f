"""Synthetic results folders for the report tests and the scale benchmark.

The real producers (the Locust sink, the telemetry recorder, the microbenchmarks) are
built in parallel; the report must not wait for them. This module writes a folder
with exactly the documented layout (manifest.json, requests.parquet with every
RECORD_FIELDS column, long-form telemetry.parquet, microbench.json) from a seeded
model with known answers: a prefill slope, a telemetry series that drives TTFT at a
chosen lag, a TPOT scale, LoRA cold starts, hostile strings. Vectorised, so a million
records take seconds.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from scipy.signal import lfilter

from tests.synthetic_files import RequestsWriter, write_jsonl
from zerohop.core.records import RECORD_FIELDS

T0 = 1_764_000_000.0  # wall-clock origin of every synthetic run
CHUNK_ROWS = 1_000_000  # requests per generated row group (bounds the generator's memory)
HOSTILE = "<script>alert(1)</script>"
GPU_METRICS: tuple[str, ...] = (
    "gpu_sm_util_pct",
    "gpu_mem_util_pct",
    "gpu_mem_used_bytes",
    "gpu_mem_total_bytes",
    "gpu_power_w",
    "gpu_temp_c",
    "pcie_rx_bytes_per_s",
    "pcie_tx_bytes_per_s",
)


@dataclass(frozen=True)
class WorkloadModel:
    name: str
    share: float  # fraction of requests
    input_tokens_median: float
    output_tokens_max: int


@dataclass(frozen=True)
class SyntheticRun:
    """Parameters of one synthetic run. `plan_seed` fixes the request plan (the same
    seeded workload); `noise_seed` the measured latencies (run-to-run noise)."""

    n_requests: int = 3000
    duration_s: float = 120.0
    workloads: tuple[WorkloadModel, ...] = (
        WorkloadModel("chat", 0.6, 400.0, 64),
        WorkloadModel("summarise", 0.4, 3000.0, 32),
    )
    plan_seed: int = 0
    noise_seed: int = 1
    ttft_base_ms: float = 30.0
    prefill_ms_per_1k: float = 60.0
    ttft_noise_sigma: float = 0.15  # lognormal sigma of TTFT noise
    tpot_ms: float = 12.0
    tpot_scale: float = 1.0  # 1.2 = a target made 20 % slower per token
    itl_noise_sigma: float = 0.2
    same_read_share: float = 0.0  # share of ITL gaps whose token came in the previous read
    extra_layer_ms: float = 0.0  # added to TTFT and E2E (a proxy in the path)
    error_rate: float = 0.01
    adapters: tuple[str, ...] = ()
    cold_load_ms: float = 400.0
    open_loop: bool = True
    # telemetry
    telemetry: bool = True
    telemetry_interval_s: float = 0.5
    gpus: int = 2
    dcgm_labels: bool = False  # GPU lanes labelled as DCGM does (UUID, Hostname, ...)
    driver_metric: str = "queue_depth"  # the series that drives TTFT
    driver_lag_s: float = 0.0
    driver_gain_ms: float = 80.0
    driver_tau_s: float = 3.0
    # content
    hostile: bool = False
    microbench: bool = True
    target_kind: str = "embedded"
    raw_prometheus: bool = False  # the target's /metrics as scraped (vLLM-like families)
    sinks_only: bool = False  # write records/*.jsonl instead of requests.parquet
    slo: dict[str, float] = field(
        default_factory=lambda: {"ttft_p99_ms": 2000.0, "tpot_p99_ms": 50.0}
    )
    name: str = "synthetic"


def write_run(root: Path, spec: SyntheticRun = SyntheticRun()) -> Path:
    """Write a complete results folder under `root`; returns the folder."""
    run_dir = Path(root) / f"20261129-193000-{spec.name}"
    run_dir.mkdir(parents=True, exist_ok=True)
    driver_ts, driver = driver_process(spec)
    if spec.sinks_only:
        write_jsonl(run_dir, *request_columns(spec, driver_ts, driver))
    elif spec.n_requests <= CHUNK_ROWS:
        with RequestsWriter(run_dir / "requests.parquet") as writer:
            writer.write(*request_columns(spec, driver_ts, driver))
    else:
        _write_chunked(run_dir / "requests.parquet", spec, driver_ts, driver)
    if spec.telemetry:
        pq.write_table(telemetry_table(spec, driver_ts, driver), run_dir / "telemetry.parquet")
    if spec.microbench:
        (run_dir / "microbench.json").write_text(json.dumps(microbench_doc()), encoding="utf-8")
    (run_dir / "manifest.json").write_text(json.dumps(manifest(spec)), encoding="utf-8")
    return run_dir


def _write_chunked(
    path: Path, spec: SyntheticRun, driver_ts: np.ndarray, driver: np.ndarray
) -> None:
    """A large run as row groups of CHUNK_ROWS requests, each over its own slice of the
    run's time, so 10 million records never sit in memory at once."""
    n_chunks = -(-spec.n_requests // CHUNK_ROWS)
    slice_s = spec.duration_s / n_chunks
    with RequestsWriter(path) as writer:
        for index in range(n_chunks):
            first = index * CHUNK_ROWS
            part = replace(
                spec, n_requests=min(CHUNK_ROWS, spec.n_requests - first), duration_s=slice_s
            )
            chunk = Chunk(index=index, first_id=first, start_s=index * slice_s)
            writer.write(*request_columns(part, driver_ts, driver, chunk))


def driver_process(spec: SyntheticRun) -> tuple[np.ndarray, np.ndarray]:
    """A unit-variance AR(1) process on the telemetry grid (correlation time tau)."""
    step = spec.telemetry_interval_s
    ts = T0 + np.arange(0.0, spec.duration_s + step, step)
    rng = np.random.default_rng([spec.plan_seed, 7])
    phi = float(np.exp(-step / spec.driver_tau_s))
    shocks = rng.standard_normal(ts.size) * np.sqrt(1.0 - phi * phi)
    return ts, lfilter([1.0], [1.0, -phi], shocks)


@dataclass(frozen=True)
class Chunk:
    """One slice of a run written in pieces: `spec.n_requests` requests numbered from
    `first_id`, arriving in `[start_s, start_s + spec.duration_s)`, with their own seeds."""

    index: int
    first_id: int
    start_s: float


def request_columns(
    spec: SyntheticRun, driver_ts: np.ndarray, driver: np.ndarray, chunk: Chunk | None = None
) -> tuple[dict[str, Any], np.ndarray, np.ndarray]:
    """Every RECORD_FIELDS column (list columns as offsets + flat values)."""
    tail = () if chunk is None else (chunk.index,)
    plan = np.random.default_rng([spec.plan_seed, 1, *tail])
    noise = np.random.default_rng([spec.noise_seed, 2, *tail])
    n = spec.n_requests
    start_s = 0.0 if chunk is None else chunk.start_s
    scheduled = T0 + start_s + np.sort(plan.uniform(0.0, spec.duration_s, n))
    shares = np.array([w.share for w in spec.workloads])
    which = plan.choice(len(spec.workloads), size=n, p=shares / shares.sum())
    medians = np.array([w.input_tokens_median for w in spec.workloads])[which]
    input_tokens = np.maximum(8, np.round(medians * plan.lognormal(0.0, 0.5, n))).astype(np.int64)
    max_out = np.array([w.output_tokens_max for w in spec.workloads])[which]
    output_tokens = plan.integers(1, max_out + 1).astype(np.int64)
    lag_ms = noise.exponential(0.3, n) if spec.open_loop else np.full(n, np.nan)
    sent = scheduled + np.nan_to_num(lag_ms) / 1000.0

    drive = np.interp(sent - spec.driver_lag_s, driver_ts, driver)
    ttft = (
        spec.ttft_base_ms
        + spec.prefill_ms_per_1k * input_tokens / 1000.0
        + spec.driver_gain_ms * np.maximum(drive + 2.0, 0.0)
    ) * noise.lognormal(0.0, spec.ttft_noise_sigma, n) + spec.extra_layer_ms

    adapter = np.full(n, None, dtype=object)
    if spec.adapters:
        picks = plan.integers(0, len(spec.adapters), n)
        adapter = np.array(spec.adapters, dtype=object)[picks]
        if chunk is None or chunk.index == 0:  # an adapter loads cold once per run
            first = np.unique(picks, return_index=True)[1]
            ttft[first] += spec.cold_load_ms

    gaps = np.maximum(output_tokens - 1, 0)
    offsets = np.concatenate(([0], np.cumsum(gaps)))
    row_tpot = spec.tpot_ms * spec.tpot_scale * noise.lognormal(0.0, 0.1, n)
    itl = np.repeat(row_tpot, gaps) * noise.lognormal(0.0, spec.itl_noise_sigma, int(gaps.sum()))
    if spec.same_read_share:  # its own stream: the other draws stay as they were
        batched = np.random.default_rng([spec.noise_seed, 5]).random(itl.size)
        itl[batched < spec.same_read_share] = 0.0
    decode = np.zeros(n)
    has = gaps > 0
    decode[has] = np.add.reduceat(itl, offsets[:-1][has]) if itl.size else 0.0
    e2e = ttft + decode
    tpot = np.where(output_tokens >= 2, decode / np.maximum(gaps, 1), np.nan)

    outcome = np.full(n, "ok", dtype=object)
    message = np.full(n, None, dtype=object)
    error_type = np.full(n, None, dtype=object)
    http_status = np.full(n, 200.0)
    failed = noise.random(n) < spec.error_rate
    kinds = noise.integers(0, 3, n)
    table = (
        ("http_503", "HTTP 503", "server overloaded, retry later"),
        ("timeout_ttft", "timeout", "no first token within 30 s"),
        ("stream_error:overloaded_error", "overloaded_error", "Overloaded"),
    )
    for k, (name, kind, text) in enumerate(table):
        mask = failed & (kinds == k)
        outcome[mask] = name
        error_type[mask] = kind
        message[mask] = text
    http_status[failed & (kinds == 0)] = 503.0
    if spec.hostile and failed.any():
        idx = int(np.flatnonzero(failed)[0])
        message[idx] = HOSTILE
    if spec.hostile and spec.adapters:
        adapter[adapter == spec.adapters[-1]] = HOSTILE
    ttft[failed] = np.nan
    e2e[failed] = np.nan
    tpot[failed] = np.nan
    first_content = np.where(failed, np.nan, sent + ttft / 1000.0)
    end = np.where(failed, sent + 0.05, sent + e2e / 1000.0)

    names = np.array([w.name for w in spec.workloads], dtype=object)[which]
    first_id = 0 if chunk is None else chunk.first_id
    columns: dict[str, Any] = {
        "request_id": np.char.add("r", np.arange(first_id, first_id + n).astype(str)).astype(
            object
        ),
        "workload": names,
        "api": np.full(n, "openai-chat", dtype=object),
        "model": np.full(n, "llama-3-8b", dtype=object),
        "outcome": outcome,
        "adapter": adapter,
        "worker": np.full(n, "synthetic:1", dtype=object),
        "scheduled_ts": scheduled if spec.open_loop else np.full(n, np.nan),
        "sent_ts": sent,
        "first_content_ts": first_content,
        "end_ts": end,
        "schedule_lag_ms": lag_ms,
        "ttft_ms": ttft,
        "e2e_ms": e2e,
        "tpot_ms": tpot,
        "ttft_from_schedule_ms": ttft + np.nan_to_num(lag_ms)
        if spec.open_loop
        else np.full(n, np.nan),
        "e2e_from_schedule_ms": e2e + np.nan_to_num(lag_ms)
        if spec.open_loop
        else np.full(n, np.nan),
        "content_events": np.where(failed, 0, output_tokens),
        "input_tokens": input_tokens,
        "output_tokens": np.where(failed, 0, output_tokens),
        "token_source": np.full(n, "usage", dtype=object),
        "target_input_tokens": input_tokens,
        "max_tokens": max_out,
        "http_status": http_status,
        "error_type": error_type,
        "error_message": message,
        "logical_request_id": np.full(n, None, dtype=object),
        "attempt": np.ones(n, dtype=np.int64),
        "server_ttft_ms": ttft * 0.98,
        **{name: np.full(n, np.nan) for name in (
            "retry_after_s", "backoff_ms", "logical_e2e_ms", "logical_ttft_ms",
            "logical_attempts")},
        **{name: np.full(n, None, dtype=object) for name in (
            "attempt_reason", "final_outcome", "answered_by", "give_up_reason")},
    }
    for name in RECORD_FIELDS:  # fields this model does not make (text ones): null
        if name not in ("itl_ms", "tokens_per_event"):
            columns.setdefault(name, np.full(n, None, dtype=object))
    # failed requests carry no gaps
    keep_gap = np.repeat(~failed, gaps)
    kept = np.where(failed, 0, gaps)
    return columns, np.concatenate(([0], np.cumsum(kept))), itl[keep_gap]


def telemetry_table(spec: SyntheticRun, driver_ts: np.ndarray, driver: np.ndarray) -> pa.Table:
    """Long-form telemetry: per-GPU NVML lanes, server lanes, load-generator lanes
    and one gap row. `spec.driver_metric` is the driver itself (scaled); every other
    lane is independent of latency."""
    rng = np.random.default_rng([spec.plan_seed, 3])
    ts = driver_ts
    size = ts.size
    lanes: list[tuple[str, str, str, np.ndarray]] = []

    def ar1(tau: float) -> np.ndarray:
        phi = float(np.exp(-spec.telemetry_interval_s / tau))
        shocks = rng.standard_normal(size) * np.sqrt(1.0 - phi * phi)
        return lfilter([1.0], [1.0, -phi], shocks)

    gpu_base = {
        "gpu_sm_util_pct": (70.0, 15.0),
        "gpu_mem_util_pct": (40.0, 10.0),
        "gpu_mem_used_bytes": (60e9, 2e9),
        "gpu_mem_total_bytes": (80e9, 0.0),
        "gpu_power_w": (450.0, 60.0),
        "gpu_temp_c": (65.0, 4.0),
        "pcie_rx_bytes_per_s": (2e9, 1e9),
        "pcie_tx_bytes_per_s": (1e9, 5e8),
    }
    for gpu in range(spec.gpus):
        gpu_labels = {"gpu": str(gpu)}
        if spec.dcgm_labels:
            gpu_labels |= {"UUID": f"GPU-5f3c9a1e-77d2-4b0e-9c1a-{gpu:012d}",
                           "Hostname": "node-a", "device": f"nvidia{gpu}",
                           "modelName": "NVIDIA H200"}
        labels = json.dumps(gpu_labels)
        for metric in GPU_METRICS:
            mean, sd = gpu_base[metric]
            values = mean + sd * ar1(4.0)
            lanes.append(("nvml", metric, labels, np.maximum(values, 0.0)))
    server = "prom:127.0.0.1:8000"
    server_lanes = {
        "queue_depth": np.maximum(0.0, 4.0 + 3.0 * ar1(3.0)),
        "running_requests": np.maximum(0.0, 32.0 + 4.0 * ar1(5.0)),
        "kv_cache_usage_frac": np.clip(0.5 + 0.1 * ar1(6.0), 0.0, 1.0),
    }
    driven = 4.0 + 3.0 * driver
    if spec.driver_metric in server_lanes:
        server_lanes[spec.driver_metric] = driven
    for metric, values in server_lanes.items():
        lanes.append((server, metric, "{}", values))
    if spec.driver_metric not in server_lanes and spec.driver_metric not in GPU_METRICS:
        lanes.append((server, spec.driver_metric, "{}", driven))
    if spec.raw_prometheus:
        lanes += raw_prometheus_lanes(ts, rng)
    loadgen = "loadgen:synthetic:1"
    lanes.append((loadgen, "loadgen_cpu_pct", "{}", np.clip(35 + 5 * ar1(2.0), 0, 100)))
    lanes.append((loadgen, "loadgen_rss_bytes", "{}", 2e8 + 1e6 * np.arange(size) / size))
    lanes.append((loadgen, "loadgen_loop_lag_ms", "{}", np.abs(0.2 + 0.05 * ar1(1.0))))
    gap = (server, "gap", json.dumps({"reason": "connection refused"}), np.array([1.5]))
    gap_ts = np.array([T0 + spec.duration_s / 2])
    rows = [*lanes, gap]
    stamps = [ts] * len(lanes) + [gap_ts]

    def text_column(position: int) -> pa.Array:
        parts = [pa.array([row[position]] * row[3].size, pa.string()) for row in rows]
        return pa.concat_arrays(parts).dictionary_encode()

    return pa.table(
        {
            "ts": np.concatenate(stamps),
            "source": text_column(0),
            "metric": text_column(1),
            "labels": text_column(2),
            "value": np.concatenate([row[3] for row in rows]),
        }
    )


RAW_SOURCE = "prom-raw:127.0.0.1:8000"
TTFT_BUCKETS: tuple[float, ...] = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5,
                                   0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0,
                                   640.0, 2560.0, float("inf"))


def raw_prometheus_lanes(
    ts: np.ndarray, rng: np.random.Generator
) -> list[tuple[str, str, str, np.ndarray]]:
    """What a vLLM-like /metrics gives, scraped raw: a TTFT histogram (cumulative
    buckets, sum and count) of lognormal observations around 50 ms at 40 per second,
    two counters, a 0–1 `_perc` gauge, a DCGM power gauge of the embedded target's
    modelled GPU and an info series with a dozen label sets."""
    model = {"model_name": "m"}
    per_sample = rng.poisson(40.0 * np.diff(ts, prepend=ts[0]))
    observations = [rng.lognormal(np.log(0.05), 0.5, k) for k in per_sample]
    lanes = []
    for le in TTFT_BUCKETS:
        counts = np.cumsum([(o <= le).sum() for o in observations]).astype(float)
        labels = json.dumps({**model, "le": "+Inf" if le == float("inf") else str(le)})
        lanes.append((RAW_SOURCE, "vllm:time_to_first_token_seconds_bucket", labels, counts))
    plain = json.dumps(model)
    lanes.append((RAW_SOURCE, "vllm:time_to_first_token_seconds_count", plain,
                  np.cumsum(per_sample).astype(float)))
    lanes.append((RAW_SOURCE, "vllm:time_to_first_token_seconds_sum", plain,
                  np.cumsum([o.sum() for o in observations])))
    lanes.append((RAW_SOURCE, "vllm:prompt_tokens_total", plain,
                  np.cumsum(per_sample * 300.0)))
    lanes.append((RAW_SOURCE, "vllm:request_success_total",
                  json.dumps({**model, "finished_reason": "length"}),
                  np.cumsum(per_sample).astype(float)))
    lanes.append((RAW_SOURCE, "vllm:kv_cache_usage_perc", plain,
                  np.clip(0.3 + 0.05 * rng.standard_normal(ts.size), 0.0, 1.0)))
    lanes.append((RAW_SOURCE, "DCGM_FI_DEV_POWER_USAGE", json.dumps({"gpu": "0"}),
                  600.0 + 20.0 * rng.standard_normal(ts.size)))
    for i in range(12):
        labels = json.dumps({"max_lora": "4", "running_lora_adapters": f"lora-{i}",
                             "waiting_lora_adapters": ""})
        lanes.append((RAW_SOURCE, "vllm:lora_requests_info", labels, np.full(ts.size, T0)))
    return lanes


def manifest(spec: SyntheticRun) -> dict[str, Any]:
    return {
        "schema": "zerohop.run",
        "schema_version": 1,
        "run_id": f"20261129-193000-{spec.name}",
        "name": spec.name,
        "status": "completed",
        "end_reason": "finished",
        "started_at": "2026-11-29T19:30:00Z",
        "ended_at": "2026-11-29T19:32:00Z",
        "duration_s": spec.duration_s,
        "target": {"url": "http://127.0.0.1:8000", "kind": spec.target_kind, "api": "openai-chat"},
        "workloads": [
            {"name": w.name, "file": f"workloads/{w.name}.yaml", "spec": {"seed": spec.plan_seed}}
            for w in spec.workloads
        ],
        "load": {
            "mode": "open" if spec.open_loop else "closed",
            "users": 20,
            "rate_rps": 25.0,
            "arrival": "poisson",
        },
        "slo": dict(spec.slo),
        "config": {
            "api_key": "***",
            "headers": {"Authorization": "Bearer sk-live-secret-123456"},
            "proxy": "http://user:hunter2@127.0.0.1:3128",
            "max_tokens": 256,
            "note": HOSTILE if spec.hostile else "plain",
        },
        "versions": {"zerohop": "0.1.0", "python": "3.11.7", "locust": "2.47.0"},
        "host": {"hostname": "ci-runner", "platform": "Linux", "cpu_count": 2},
        "gpu": [{"index": i, "name": "NVIDIA H200", "driver": "580.1"} for i in range(spec.gpus)],
        "client_fidelity": {
            "cpu_max_pct": 41.0,
            "schedule_lag_p99_ms": 1.2,
            "flagged": False,
            "reason": None,
        },
        "locust": {"workers": 0, "processes": 1},
    }


def microbench_doc() -> dict[str, Any]:
    def stat(unit: str, median: float, description: str) -> dict[str, Any]:
        return {
            "unit": unit,
            "median": median,
            "p50": median,
            "p99": median * 1.4,
            "min": median * 0.9,
            "max": median * 3,
            "mean": median * 1.05,
            "stdev": median * 0.1,
            "n": 2000,
            "description": description,
        }

    sizes = [2**k for k in range(12, 29, 2)]
    curve = [
        {
            "direction": direction,
            "memory": memory,
            "size_bytes": size,
            "gbps": stat("GB/s", peak * size / (size + 2e5), "copy bandwidth"),
            "pct_of_link": 100 * peak * size / (size + 2e5) / 63.0,
            "verified": True,
        }
        for direction, memory, peak in (
            ("h2d", "pinned", 55.0),
            ("d2h", "pinned", 53.0),
            ("h2d", "pageable", 25.0),
        )
        for size in sizes
    ]
    return {
        "schema": "zerohop.microbench",
        "schema_version": 1,
        "status": "ok",
        "reason": None,
        "created_at": "2026-11-29T19:29:00Z",
        "zerohop_version": "0.1.0",
        "environment": {
            "gpu_name": "NVIDIA H200",
            "driver_version": "580.1",
            "sm_count": 132,
            "pcie": {
                "gen": 5,
                "width": 16,
                "max_gen": 5,
                "max_width": 16,
                "theoretical_gbps_per_direction": 63.0,
            },
            "clock_event_reasons_before": ["none"],
        },
        "benchmarks": {
            "launch": {
                "status": "ok",
                "reason": None,
                "metrics": {
                    "async_launch_us": stat("us", 2.1, "per empty kernel, back-to-back"),
                    "launch_sync_roundtrip_us": stat("us", 8.5, "launch + synchronize"),
                },
            },
            "ring": {
                "status": "skipped",
                "reason": "ring kernel needs CuPy RawModule",
                "metrics": {},
            },
            "pcie": {
                "status": "ok",
                "reason": None,
                "metrics": {"h2d_pinned_256MiB_gbps": stat("GB/s", 55.0, "host to device, pinned")},
                "curve": curve,
            },
        },
    }
