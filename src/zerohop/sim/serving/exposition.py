"""`/metrics` in Prometheus text format: vLLM's metric names, DCGM-exporter GPU names.

Engine metrics carry vLLM's `model_name` label (one engine per served model). The GPU
gauges and the energy counter (mJ, the modelled power's integral) are modelled from
the engine's recent steps (see `gpu_activity.GpuActivity`) and carry DCGM exporter
labels (`gpu`, `modelName`); an engine with tensor parallelism owns `tp` consecutive
GPU indices, each drawing the modelled power.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from zerohop.sim.engine.engine import Engine
from zerohop.sim.engine.histograms import LAG_BUCKETS_S, BucketHistogram, LagRecorder

CONTENT_TYPE = b"text/plain; version=0.0.4; charset=utf-8"

# One sample per engine: vLLM's name, type, help text, and the value as written.
_ENGINE_VALUES: tuple[tuple[str, str, str, Callable[[Engine], str]], ...] = (
    ("vllm:num_requests_running", "gauge", "Number of requests in model execution batches.",
     lambda e: str(len(e.running))),
    ("vllm:num_requests_waiting", "gauge", "Number of requests waiting to be processed.",
     lambda e: str(len(e.waiting))),
    ("vllm:kv_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage.",
     lambda e: f"{e.kv_usage():.6f}"),
    ("vllm:gpu_cache_usage_perc", "gauge", "GPU KV-cache usage (pre-V1 name).",
     lambda e: f"{e.kv_usage():.6f}"),
    ("vllm:num_preemptions_total", "counter", "Cumulative number of preemptions.",
     lambda e: str(e.stats.preemptions_total)),
    ("vllm:prefix_cache_queries_total", "counter",
     "Prefix cache queries, in terms of number of queried tokens.",
     lambda e: str(e.stats.prefix_cache_queries_total)),
    ("vllm:prefix_cache_hits_total", "counter",
     "Prefix cache hits, in terms of number of cached tokens.",
     lambda e: str(e.stats.prefix_cache_hits_total)),
    ("vllm:prompt_tokens_total", "counter", "Number of prefill tokens processed.",
     lambda e: str(e.stats.prompt_tokens_total)),
    ("vllm:generation_tokens_total", "counter", "Number of generation tokens processed.",
     lambda e: str(e.stats.generation_tokens_total)),
)


def render_metrics(
    engines: Sequence[Engine], loop_lag: LagRecorder, emission_lag: LagRecorder
) -> bytes:
    out: list[str] = []
    now_ns = time.perf_counter_ns()

    def family(name: str, kind: str, help_text: str) -> None:
        out.append(f"# HELP {name} {help_text}")
        out.append(f"# TYPE {name} {kind}")

    def labels_of(engine: Engine) -> str:
        return f'model_name="{_esc(engine.name)}"'

    for name, kind, help_text, value in _ENGINE_VALUES:
        family(name, kind, help_text)
        for e in engines:
            out.append(f"{name}{{{labels_of(e)}}} {value(e)}")
    family("vllm:request_success_total", "counter", "Count of successfully processed requests.")
    for e in engines:
        for reason, n in e.stats.success_total.items():
            out.append(
                f'vllm:request_success_total{{{labels_of(e)},finished_reason="{reason}"}} {n}'
            )
    family("vllm:lora_requests_info", "gauge", "Running stats on lora requests (value: timestamp).")
    for e in engines:
        if not e.lora.known:
            continue
        running = ",".join(sorted({s.adapter for s in e.running if s.adapter}))
        waiting = ",".join(sorted({s.adapter for s in e.waiting if s.adapter}))
        out.append(
            f'vllm:lora_requests_info{{max_lora="{e.lora.max_loras}",'
            f'running_lora_adapters="{_esc(running)}",waiting_lora_adapters="{_esc(waiting)}"}} '
            f"{time.time():.3f}"
        )
    _spec_decode_counters(out, family, engines, labels_of)
    _histograms(out, family, engines, labels_of)
    _gpu_gauges(out, family, engines, now_ns)
    family(
        "zerohop_sim_loop_lag_seconds",
        "histogram",
        "Lateness of a periodic probe timer: how long the sim's event loop was busy.",
    )
    _lag_histogram(out, "zerohop_sim_loop_lag_seconds", loop_lag)
    family(
        "zerohop_sim_emission_lag_seconds",
        "histogram",
        "Time from a token's modelled emission to its write to the socket.",
    )
    _lag_histogram(out, "zerohop_sim_emission_lag_seconds", emission_lag)
    family("zerohop_sim_loop_lag_max_seconds", "gauge", "Largest loop lag seen.")
    out.append(f"zerohop_sim_loop_lag_max_seconds {loop_lag.max_us / 1e6:.6f}")
    return ("\n".join(out) + "\n").encode()


def _spec_decode_counters(
    out: list[str],
    family: Callable[[str, str, str], None],
    engines: Sequence[Engine],
    labels_of: Callable[[Engine], str],
) -> None:
    """vLLM V1's speculative-decoding counters, for the engines with a modelled draft."""
    drafting = [e for e in engines if e.draft is not None]
    if not drafting:
        return
    for name, help_text, attr in _SPEC_DECODE_COUNTERS:
        family(name, "counter", help_text)
        for e in drafting:
            assert e.draft is not None
            out.append(f"{name}{{{labels_of(e)}}} {getattr(e.draft.counters, attr)}")
    name = "vllm:spec_decode_num_accepted_tokens_per_pos_total"
    family(name, "counter", "Accepted draft tokens, by position in the draft.")
    for e in drafting:
        assert e.draft is not None
        for position, n in enumerate(e.draft.counters.accepted_per_pos):
            out.append(f'{name}{{{labels_of(e)},position="{position}"}} {n}')


_SPEC_DECODE_COUNTERS = (
    ("vllm:spec_decode_num_drafts_total", "Number of spec decoding drafts.", "drafts"),
    ("vllm:spec_decode_num_draft_tokens_total", "Number of draft tokens.", "draft_tokens"),
    ("vllm:spec_decode_num_accepted_tokens_total", "Number of accepted tokens.",
     "accepted_tokens"),
)


def _histograms(
    out: list[str],
    family: Callable[[str, str, str], None],
    engines: Sequence[Engine],
    labels_of: Callable[[Engine], str],
) -> None:
    specs = [
        (
            "vllm:time_to_first_token_seconds",
            "Histogram of time to first token in seconds.",
            "ttft",
        ),
        ("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", "itl"),
        (
            "vllm:time_per_output_token_seconds",
            "Histogram of time per output token (old name).",
            "itl",
        ),
        ("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", "e2e"),
        (
            "vllm:request_queue_time_seconds",
            "Histogram of time spent in WAITING phase.",
            "queue_time",
        ),
        (
            "vllm:request_prefill_time_seconds",
            "Histogram of time spent in PREFILL phase for request.",
            "prefill_time",
        ),
        (
            "vllm:request_decode_time_seconds",
            "Histogram of time spent in DECODE phase for request.",
            "decode_time",
        ),
    ]
    for name, help_text, attr in specs:
        family(name, "histogram", help_text)
        for e in engines:
            hist: BucketHistogram = getattr(e.stats, attr)
            labels = labels_of(e)
            for le, count in hist.cumulative():
                out.append(f'{name}_bucket{{{labels},le="{le}"}} {count}')
            out.append(f"{name}_sum{{{labels}}} {hist.sum:.6f}")
            out.append(f"{name}_count{{{labels}}} {hist.count}")


def _gpu_gauges(
    out: list[str],
    family: Callable[[str, str, str], None],
    engines: Sequence[Engine],
    now_ns: int,
) -> None:
    rows: list[tuple[int, Engine, dict[str, float]]] = []
    index = 0
    for e in engines:
        sample = e.activity.sample(now_ns)
        for _ in range(e.tp):
            rows.append((index, e, sample))
            index += 1
    gauges = [
        ("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).", lambda e, s: s["util_pct"]),
        ("DCGM_FI_DEV_SM_CLOCK", "SM clock frequency (in MHz).", lambda e, s: s["sm_clock_mhz"]),
        (
            "DCGM_FI_DEV_FB_USED",
            "Framebuffer memory used (in MiB).",
            lambda e, s: e.memory_used_mib_per_gpu(),
        ),
        (
            "DCGM_FI_DEV_FB_FREE",
            "Framebuffer memory free (in MiB).",
            lambda e, s: e.gpu.memory_mib - e.memory_used_mib_per_gpu(),
        ),
        (
            "DCGM_FI_PROF_PCIE_RX_BYTES",
            "The rate of data received over the PCIe bus (B/s).",
            lambda e, s: s["pcie_rx_bps"] / e.tp,
        ),
        (
            "DCGM_FI_PROF_PCIE_TX_BYTES",
            "The rate of data transmitted over the PCIe bus (B/s).",
            lambda e, s: s["pcie_tx_bps"] / e.tp,
        ),
        ("DCGM_FI_DEV_POWER_USAGE", "Power draw (in W).", lambda e, s: s["power_w"]),
        ("DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C).", lambda e, s: s["temp_c"]),
    ]
    energy = (
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
        "Total energy consumption since boot (in mJ).",
        lambda e, s: s["energy_j"] * 1000.0,
    )
    for kind, (name, help_text, value) in [*(("gauge", g) for g in gauges), ("counter", energy)]:
        family(name, kind, help_text)
        for i, e, sample in rows:
            labels = (
                f'gpu="{i}",UUID="GPU-zerohop-sim-{i:04d}",device="nvidia{i}",'
                f'modelName="{_esc(e.gpu.display_name)}",Hostname="zerohop-sim"'
            )
            out.append(f"{name}{{{labels}}} {value(e, sample):.3f}")


def _lag_histogram(out: list[str], name: str, lag: LagRecorder) -> None:
    running = 0
    previous_us = 0
    for bound in LAG_BUCKETS_S:
        upper_us = int(bound * 1e6)
        running += sum(lag.counts[previous_us : min(upper_us, lag.limit_us)])
        running += sum(1 for v in lag.overflow if previous_us <= v < upper_us)
        previous_us = upper_us
        out.append(f'{name}_bucket{{le="{bound!r}"}} {running}')
    out.append(f'{name}_bucket{{le="+Inf"}} {lag.n}')
    out.append(f"{name}_sum {lag.total_us / 1e6:.6f}")
    out.append(f"{name}_count {lag.n}")


def _esc(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
