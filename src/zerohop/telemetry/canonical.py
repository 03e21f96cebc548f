"""Canonical telemetry metrics: what each one means, and which server names map to it.

Engines name the same thing differently (vLLM's `num_requests_waiting`, SGLang's
`num_queue_reqs`, TGI's `queue_size`, llama.cpp's `requests_deferred`); the report lines
them up under one name, with the unit in the name and the sampling semantics in
`GLOSSARY`, which the report shows. Raw series are always kept too, so nothing is lost
when a mapping is imperfect.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

GLOSSARY: dict[str, str] = {
    # --- server (Prometheus /metrics) -------------------------------------------------
    "queue_depth": "requests waiting for admission (gauge, count) at the scrape: "
    "vllm:num_requests_waiting, sglang:num_queue_reqs, tgi_queue_size, "
    "llamacpp:requests_deferred (requests no slot took yet).",
    "running_requests": "requests in the running batch (gauge, count) at the scrape: "
    "vllm:num_requests_running, sglang:num_running_reqs, tgi_batch_current_size, "
    "llamacpp:requests_processing (busy slots).",
    "kv_cache_usage_frac": "fraction 0–1 of KV-cache blocks in use at the scrape: "
    "vllm:kv_cache_usage_perc (older vllm:gpu_cache_usage_perc; a 0–1 value despite "
    "the name), sglang:token_usage.",
    "server_ttft_p50_s": "median server-side time to first token, seconds, over the "
    "requests finished between two scrapes: quantile of the histogram's bucket deltas, "
    "linear within the bucket as Prometheus' histogram_quantile (vllm:/sglang:"
    "time_to_first_token_seconds). No row for a window without requests.",
    "server_ttft_p99_s": "99th percentile of the same windowed TTFT histogram; bounded by "
    "the bucket edges (a p99 in the top finite bucket reads as that bucket's upper edge).",
    "prompt_tokens_per_s": "prefill tokens per second between two scrapes (counter rate, "
    "resets handled): vllm:/sglang:prompt_tokens_total, tgi_request_input_length_sum, "
    "llamacpp:prompt_tokens_total (which leaves out the tokens its cache answered).",
    "generation_tokens_per_s": "generated tokens per second between two scrapes (counter "
    "rate): vllm:/sglang:generation_tokens_total, tgi_request_generated_tokens_sum, "
    "llamacpp:tokens_predicted_total.",
    "preemptions_per_s": "preemptions per second between two scrapes (counter rate): "
    "vllm:num_preemptions_total.",
    "prefix_cache_hit_tokens_per_s": "prompt tokens per second the prefix cache answered "
    "between two scrapes (counter rate): vllm:prefix_cache_hits_total, "
    "llamacpp:prompt_tokens_cached_total.",
    "prefix_cache_query_tokens_per_s": "prompt tokens per second looked up in the prefix "
    "cache between two scrapes (counter rate): vllm:prefix_cache_queries_total; hits ÷ "
    "queries is the server's own cache hit rate.",
    "spec_drafts_per_s": "speculative-decoding drafts per second between two scrapes "
    "(counter rate; one per sequence per verifying step): vllm:/llamacpp:"
    "spec_decode_num_drafts_total.",
    "spec_draft_tokens_per_s": "draft tokens proposed per second between two scrapes "
    "(counter rate): vllm:/llamacpp:spec_decode_num_draft_tokens_total.",
    "spec_accepted_tokens_per_s": "draft tokens the target accepted per second between two "
    "scrapes (counter rate): vllm:/llamacpp:spec_decode_num_accepted_tokens_total; accepted "
    "÷ draft tokens is the acceptance rate.",
    "spec_accepted_tokens_per_pos_per_s": "accepted draft tokens per second at one position "
    "of the draft (label position, 0 = first), between two scrapes (counter rate): "
    "vllm:spec_decode_num_accepted_tokens_per_pos_total.",
    "spec_accept_length": "SGLang's mean accepted length per verification (gauge, tokens, "
    "over its last logging interval): sglang:spec_accept_length.",
    "spec_accept_rate": "SGLang's acceptance rate, accepted ÷ draft tokens (gauge, 0–1, "
    "over its last logging interval): sglang:spec_accept_rate.",
    # --- GPU (NVML, or a DCGM exporter) -----------------------------------------------
    "gpu_sm_util_pct": "percent of the driver's sample window (1/6 s to 1 s by product) "
    "during which at least one kernel ran — 'any kernel running', not SM occupancy: "
    "100 with one tiny kernel is possible. nvmlDeviceGetUtilizationRates.gpu, "
    "DCGM_FI_DEV_GPU_UTIL.",
    "gpu_mem_util_pct": "percent of the same window during which device memory was read "
    "or written (nvmlDeviceGetUtilizationRates.memory, DCGM_FI_DEV_MEM_COPY_UTIL).",
    "gpu_mem_used_bytes": "device memory allocated at the sample, bytes "
    "(nvmlDeviceGetMemoryInfo.used incl. driver reservations; DCGM_FI_DEV_FB_USED MiB×2^20).",
    "gpu_mem_total_bytes": "device memory size, bytes (nvmlDeviceGetMemoryInfo.total, "
    "DCGM_FI_DEV_FB_TOTAL).",
    "gpu_power_w": "board power the driver reports, watts: on Ampere (except GA100) and "
    "newer a 1 s moving average, on older GPUs instantaneous (nvmlDeviceGetPowerUsage, "
    "DCGM_FI_DEV_POWER_USAGE).",
    "gpu_energy_j": "energy the board used since the driver loaded, joules: a counter "
    "(it restarts when the driver reloads), read at the sample; its increase over a "
    "window is that window's energy, exact where integrating power samples is not "
    "(nvmlDeviceGetTotalEnergyConsumption mJ÷1000, Volta and newer; "
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION mJ÷1000).",
    "gpu_power_instant_w": "instantaneous board power, watts, where the driver offers it "
    "(NVML_FI_DEV_POWER_INSTANT, DCGM_FI_DEV_POWER_USAGE_INSTANT).",
    "gpu_power_avg_w": "board power averaged by the driver over 1 s, watts "
    "(NVML_FI_DEV_POWER_AVERAGE; Ampere and newer).",
    "gpu_temp_c": "GPU die temperature at the sample, °C (nvmlDeviceGetTemperature, "
    "DCGM_FI_DEV_GPU_TEMP).",
    "gpu_sm_clock_mhz": "SM clock at the sample, MHz (nvmlDeviceGetClockInfo SM, "
    "DCGM_FI_DEV_SM_CLOCK).",
    "gpu_mem_clock_mhz": "memory clock at the sample, MHz (nvmlDeviceGetClockInfo MEM, "
    "DCGM_FI_DEV_MEM_CLOCK).",
    "pcie_rx_bytes_per_s": "PCIe bytes per second into the GPU. NVML: measured over a "
    "20 ms window at the sample (the call itself takes ~20 ms), KB/s×1024, so bursts "
    "between samples are missed. DCGM_FI_PROF_PCIE_RX_BYTES: averaged over DCGM's "
    "interval, incl. protocol headers.",
    "pcie_tx_bytes_per_s": "PCIe bytes per second out of the GPU; same semantics as "
    "pcie_rx_bytes_per_s.",
    "gpu_throttle_reasons": "bitmask of current clock-event (throttle) reasons: 0x1 idle, "
    "0x2 application clocks, 0x4 SW power cap, 0x8 HW slowdown, 0x10 sync boost, "
    "0x20 SW thermal, 0x40 HW thermal, 0x80 HW power brake, 0x100 display clocks "
    "(nvmlDeviceGetCurrentClocksEventReasons, DCGM_FI_DEV_CLOCKS_EVENT_REASONS).",
    "pcie_link_gen": "current PCIe link generation (drops to 1 when idle on some GPUs).",
    "pcie_link_width": "current PCIe link width, lanes.",
    "gpu_sm_active_pct": "percent of SM cycles with at least one warp resident, averaged "
    "over all SMs and the interval between two samples (Hopper+ GPM SM_UTIL, "
    "DCGM_FI_PROF_SM_ACTIVE×100): how much of the GPU the kernels cover.",
    "gpu_sm_occupancy_pct": "resident warps as percent of the maximum, over the interval "
    "(GPM SM_OCCUPANCY, DCGM_FI_PROF_SM_OCCUPANCY×100).",
    "gpu_tensor_active_pct": "percent of cycles any tensor pipe was active, over the "
    "interval (GPM ANY_TENSOR_UTIL, DCGM_FI_PROF_PIPE_TENSOR_ACTIVE×100).",
    "gpu_dram_active_pct": "DRAM bandwidth used as percent of peak, over the interval "
    "(GPM DRAM_BW_UTIL, DCGM_FI_PROF_DRAM_ACTIVE×100).",
    # --- load generator ----------------------------------------------------------------
    "loadgen_cpu_pct": "CPU time of one load-generator process as percent of one core "
    "since the previous sample (psutil; >100 with several busy threads).",
    "loadgen_rss_bytes": "resident memory of one load-generator process at the sample.",
    "loadgen_loop_lag_ms": "how late a 10 ms sleep in the process' event loop (gevent hub; "
    "a thread where there is none) woke up, per window (labels stat=mean|max|p99): the "
    "delay any timestamp taken in that process may carry.",
    # --- bookkeeping --------------------------------------------------------------------
    "gap": "a source (or one GPU, or one field) could not be read from ts for value "
    "seconds (NaN: still missing when the run ended abruptly); labels carry the reason.",
    "unsupported": "a field this GPU or driver does not offer; recorded once per "
    "(gpu, field), value NaN.",
}


Kind = Literal["gauge", "counter", "rate", "histogram"]


@dataclass(frozen=True)
class SeriesMapping:
    """How one raw Prometheus series becomes a canonical metric: read as a gauge, as a
    counter kept cumulative (its deltas are what is wanted, as energy's), as a counter
    turned into a per-second rate, or as a histogram turned into windowed quantiles;
    `scale` converts units (MiB → bytes, ratio → percent, mJ → J)."""

    canonical: str
    kind: Kind
    scale: float = 1.0


# Keyed by the sample name with a trailing `_total` removed (the text parser adds
# `_total` to counters that lack it, e.g. DCGM's), histograms by family name.
SCALAR_MAP: dict[str, SeriesMapping] = {
    # vLLM
    "vllm:num_requests_waiting": SeriesMapping("queue_depth", "gauge"),
    "vllm:num_requests_running": SeriesMapping("running_requests", "gauge"),
    "vllm:kv_cache_usage_perc": SeriesMapping("kv_cache_usage_frac", "gauge"),
    "vllm:gpu_cache_usage_perc": SeriesMapping("kv_cache_usage_frac", "gauge"),
    "vllm:prompt_tokens": SeriesMapping("prompt_tokens_per_s", "rate"),
    "vllm:generation_tokens": SeriesMapping("generation_tokens_per_s", "rate"),
    "vllm:num_preemptions": SeriesMapping("preemptions_per_s", "rate"),
    "vllm:prefix_cache_hits": SeriesMapping("prefix_cache_hit_tokens_per_s", "rate"),
    "vllm:prefix_cache_queries": SeriesMapping("prefix_cache_query_tokens_per_s", "rate"),
    # vLLM V1 speculative decoding (vllm/v1/spec_decode/metrics.py: prometheus_client
    # Counters named without `_total`, the per-position one labelled `position`)
    "vllm:spec_decode_num_drafts": SeriesMapping("spec_drafts_per_s", "rate"),
    "vllm:spec_decode_num_draft_tokens": SeriesMapping("spec_draft_tokens_per_s", "rate"),
    "vllm:spec_decode_num_accepted_tokens": SeriesMapping("spec_accepted_tokens_per_s", "rate"),
    "vllm:spec_decode_num_accepted_tokens_per_pos": SeriesMapping(
        "spec_accepted_tokens_per_pos_per_s", "rate"),
    # SGLang
    "sglang:num_queue_reqs": SeriesMapping("queue_depth", "gauge"),
    "sglang:num_running_reqs": SeriesMapping("running_requests", "gauge"),
    "sglang:token_usage": SeriesMapping("kv_cache_usage_frac", "gauge"),
    "sglang:prompt_tokens": SeriesMapping("prompt_tokens_per_s", "rate"),
    "sglang:generation_tokens": SeriesMapping("generation_tokens_per_s", "rate"),
    # python/sglang/srt/metrics/collector.py: Gauges set from the scheduler's last interval
    "sglang:spec_accept_length": SeriesMapping("spec_accept_length", "gauge"),
    "sglang:spec_accept_rate": SeriesMapping("spec_accept_rate", "gauge"),
    # llama.cpp's server (tools/server/server-task.cpp, `--metrics`): counters written
    # with `_total`, gauges read at the scrape; it has no KV-cache usage series and no
    # histograms
    "llamacpp:requests_deferred": SeriesMapping("queue_depth", "gauge"),
    "llamacpp:requests_processing": SeriesMapping("running_requests", "gauge"),
    "llamacpp:prompt_tokens": SeriesMapping("prompt_tokens_per_s", "rate"),
    "llamacpp:tokens_predicted": SeriesMapping("generation_tokens_per_s", "rate"),
    "llamacpp:prompt_tokens_cached": SeriesMapping("prefix_cache_hit_tokens_per_s", "rate"),
    "llamacpp:spec_decode_num_drafts": SeriesMapping("spec_drafts_per_s", "rate"),
    "llamacpp:spec_decode_num_draft_tokens": SeriesMapping("spec_draft_tokens_per_s", "rate"),
    "llamacpp:spec_decode_num_accepted_tokens": SeriesMapping("spec_accepted_tokens_per_s",
                                                              "rate"),
    # TGI (token rates from the per-request histograms' sums)
    "tgi_queue_size": SeriesMapping("queue_depth", "gauge"),
    "tgi_batch_current_size": SeriesMapping("running_requests", "gauge"),
    "tgi_request_input_length_sum": SeriesMapping("prompt_tokens_per_s", "rate"),
    "tgi_request_generated_tokens_sum": SeriesMapping("generation_tokens_per_s", "rate"),
    # DCGM exporter (also what `zerohop exporter` and the embedded target serve)
    "DCGM_FI_DEV_GPU_UTIL": SeriesMapping("gpu_sm_util_pct", "gauge"),
    "DCGM_FI_DEV_MEM_COPY_UTIL": SeriesMapping("gpu_mem_util_pct", "gauge"),
    "DCGM_FI_DEV_FB_USED": SeriesMapping("gpu_mem_used_bytes", "gauge", 1024.0 * 1024.0),
    "DCGM_FI_DEV_FB_TOTAL": SeriesMapping("gpu_mem_total_bytes", "gauge", 1024.0 * 1024.0),
    "DCGM_FI_DEV_POWER_USAGE": SeriesMapping("gpu_power_w", "gauge"),
    "DCGM_FI_DEV_POWER_USAGE_INSTANT": SeriesMapping("gpu_power_instant_w", "gauge"),
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": SeriesMapping("gpu_energy_j", "counter", 1e-3),
    "DCGM_FI_DEV_GPU_TEMP": SeriesMapping("gpu_temp_c", "gauge"),
    "DCGM_FI_DEV_SM_CLOCK": SeriesMapping("gpu_sm_clock_mhz", "gauge"),
    "DCGM_FI_DEV_MEM_CLOCK": SeriesMapping("gpu_mem_clock_mhz", "gauge"),
    "DCGM_FI_PROF_PCIE_RX_BYTES": SeriesMapping("pcie_rx_bytes_per_s", "gauge"),
    "DCGM_FI_PROF_PCIE_TX_BYTES": SeriesMapping("pcie_tx_bytes_per_s", "gauge"),
    "DCGM_FI_DEV_CLOCKS_EVENT_REASONS": SeriesMapping("gpu_throttle_reasons", "gauge"),
    "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS": SeriesMapping("gpu_throttle_reasons", "gauge"),
    "DCGM_FI_DEV_PCIE_LINK_GEN": SeriesMapping("pcie_link_gen", "gauge"),
    "DCGM_FI_DEV_PCIE_LINK_WIDTH": SeriesMapping("pcie_link_width", "gauge"),
    "DCGM_FI_PROF_SM_ACTIVE": SeriesMapping("gpu_sm_active_pct", "gauge", 100.0),
    "DCGM_FI_PROF_SM_OCCUPANCY": SeriesMapping("gpu_sm_occupancy_pct", "gauge", 100.0),
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": SeriesMapping("gpu_tensor_active_pct", "gauge", 100.0),
    "DCGM_FI_PROF_DRAM_ACTIVE": SeriesMapping("gpu_dram_active_pct", "gauge", 100.0),
}

# histogram family -> canonical prefix; quantiles become <prefix>_p50_s / _p99_s.
HISTOGRAM_MAP: dict[str, str] = {
    "vllm:time_to_first_token_seconds": "server_ttft",
    "sglang:time_to_first_token_seconds": "server_ttft",
}
HISTOGRAM_QUANTILES: tuple[tuple[str, float], ...] = (("p50", 0.5), ("p99", 0.99))


def histogram_metric(prefix: str, quantile_name: str) -> str:
    return f"{prefix}_{quantile_name}_s"


# What `zerohop exporter` serves for each canonical NVML metric: the DCGM-exporter name
# and the factor from our unit to DCGM's, so a scraper (ours, or a Prometheus with DCGM
# dashboards) reads it as if a DCGM exporter ran. The inverse of SCALAR_MAP's DCGM part.
DCGM_EXPORT: dict[str, tuple[str, float]] = {
    m.canonical: (raw, 1.0 / m.scale)
    for raw, m in SCALAR_MAP.items()
    if raw.startswith("DCGM_") and raw != "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS"
}


def normalized_name(sample_name: str) -> str:
    """Sample name without the `_total` the text parser adds or the server wrote."""
    return sample_name[: -len("_total")] if sample_name.endswith("_total") else sample_name
