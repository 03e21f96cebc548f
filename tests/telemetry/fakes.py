# ruff: noqa: E501  (recorded exposition lines are long)
"""Test doubles for telemetry: a scriptable NVML, a /metrics server whose numbers move,
and recorded-shape exposition texts of vLLM, SGLang, TGI and a DCGM exporter."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pynvml


def wait_for(condition: Callable[[], bool], what: str, timeout_s: float = 30.0) -> None:
    """Until `condition()` holds, polled every 10 ms: a test waits on the event itself,
    not on a sleep it hopes is long enough. Fails naming `what` after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout_s} s")
        time.sleep(0.01)


class FakeNvml:
    """NvmlApi with per-GPU values; `fail[(gpu, call)] = error` makes a call raise,
    `lost.add(gpu)` makes every call on that GPU raise GpuIsLost."""

    def __init__(self, gpus: int = 2, *, init_error: BaseException | None = None) -> None:
        self.gpus = gpus
        self.init_error = init_error
        self.fail: dict[tuple[int, str], BaseException] = {}
        self.lost: set[int] = set()
        self.calls: dict[str, int] = {}
        self.inits = 0
        self.shutdowns = 0
        self.gpm_samples = 0
        self.gpm_freed = 0
        self.gpm_support = True
        self.field_errors: dict[int, BaseException] = {}

    # -- lifecycle
    def init(self) -> None:
        if self.init_error is not None:
            raise self.init_error
        self.inits += 1

    def shutdown(self) -> None:
        self.shutdowns += 1

    def device_count(self) -> int:
        return self.gpus

    def device_handle(self, index: int) -> Any:
        if index in self.lost:
            raise pynvml.NVMLError_GpuIsLost()
        return index

    def device_name(self, handle: Any) -> str:
        return f"Fake GPU {handle}"

    # -- reads
    def _check(self, handle: Any, call: str) -> None:
        self.calls[call] = self.calls.get(call, 0) + 1
        if handle in self.lost:
            raise pynvml.NVMLError_GpuIsLost()
        error = self.fail.get((handle, call))
        if error is not None:
            raise error

    def utilization_rates(self, handle: Any) -> tuple[float, float]:
        self._check(handle, "utilization_rates")
        return 50.0 + handle, 20.0 + handle

    def memory_info(self, handle: Any) -> tuple[float, float]:
        self._check(handle, "memory_info")
        return 1e9 * (handle + 1), 80e9

    def temperature_c(self, handle: Any) -> float:
        self._check(handle, "temperature_c")
        return 40.0 + handle

    def power_usage_w(self, handle: Any) -> float:
        self._check(handle, "power_usage_w")
        return 300.0 + handle

    def total_energy_j(self, handle: Any) -> float:
        self._check(handle, "total_energy_j")
        return 1000.0 * (handle + 1) + 10.0 * self.calls["total_energy_j"]

    def field_values(self, handle: Any, field_ids: Sequence[int]) -> list[float | BaseException]:
        self._check(handle, "field_values")
        return [self.field_errors.get(fid, 250_000.0 + fid) for fid in field_ids]

    def clock_mhz(self, handle: Any, clock: int) -> float:
        self._check(handle, "clock_mhz")
        return 1980.0 if clock == 1 else 2619.0

    def clocks_event_reasons(self, handle: Any) -> int:
        self._check(handle, "clocks_event_reasons")
        return 0x4

    def pcie_link_generation(self, handle: Any) -> int:
        self._check(handle, "pcie_link_generation")
        return 5

    def pcie_link_width(self, handle: Any) -> int:
        self._check(handle, "pcie_link_width")
        return 16

    def pcie_throughput_bytes_per_s(self, handle: Any, counter: int) -> float:
        self._check(handle, "pcie_throughput")
        return 1024.0 * (1000 if counter == 1 else 500)

    def gpm_supported(self, handle: Any) -> bool:
        self._check(handle, "gpm_supported")
        return self.gpm_support

    def gpm_sample(self, handle: Any) -> Any:
        self._check(handle, "gpm_sample")
        self.gpm_samples += 1
        return ("gpm", handle, self.gpm_samples)

    def gpm_metrics(self, before: Any, after: Any, metric_ids: Sequence[int]
                    ) -> list[float | BaseException]:
        assert before[1] == after[1] and before[2] < after[2]
        return [float(mid) for mid in metric_ids]

    def gpm_free(self, sample: Any) -> None:
        self.gpm_freed += 1


class MetricsServer:
    """A local /metrics endpoint whose text is `render()` at each request."""

    def __init__(self, render: Callable[[], str], port: int = 0) -> None:
        self.render = render
        self.requests = 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                outer.requests += 1
                if self.path != "/metrics":
                    self.send_response(404)
                    self.end_headers()
                    return
                body = outer.render().encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/metrics"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)


def vllm_text(*, waiting: float, running: float, kv: float, prompt_total: float,
              gen_total: float, preempt_total: float, ttft_buckets: dict[str, float],
              model: str = "tiny") -> str:
    """A vLLM-shaped exposition (names and layout as vLLM 0.1x serves them)."""
    count = ttft_buckets["+Inf"]
    bucket_lines = "\n".join(
        f'vllm:time_to_first_token_seconds_bucket{{engine="0",le="{le}",model_name="{model}"}} {v}'
        for le, v in ttft_buckets.items()
    )
    return f"""# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{{engine="0",model_name="{model}"}} {running}
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{{engine="0",model_name="{model}"}} {waiting}
# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{{engine="0",model_name="{model}"}} {kv}
# HELP vllm:prompt_tokens_total Number of prefill tokens processed.
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{{engine="0",model_name="{model}"}} {prompt_total}
vllm:prompt_tokens_created{{engine="0",model_name="{model}"}} 1.7e9
# HELP vllm:generation_tokens_total Number of generation tokens processed.
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{{engine="0",model_name="{model}"}} {gen_total}
# HELP vllm:num_preemptions_total Cumulative number of preemption from the engine.
# TYPE vllm:num_preemptions_total counter
vllm:num_preemptions_total{{engine="0",model_name="{model}"}} {preempt_total}
# HELP vllm:time_to_first_token_seconds Histogram of time to first token in seconds.
# TYPE vllm:time_to_first_token_seconds histogram
{bucket_lines}
vllm:time_to_first_token_seconds_count{{engine="0",model_name="{model}"}} {count}
vllm:time_to_first_token_seconds_sum{{engine="0",model_name="{model}"}} 1.5
"""


SGLANG_TEXT = """# HELP sglang:prompt_tokens_total Number of prefill tokens processed.
# TYPE sglang:prompt_tokens_total counter
sglang:prompt_tokens_total{model_name="meta-llama/Llama-3.1-8B-Instruct"} %(prompt)s
# HELP sglang:generation_tokens_total Number of generation tokens processed.
# TYPE sglang:generation_tokens_total counter
sglang:generation_tokens_total{model_name="meta-llama/Llama-3.1-8B-Instruct"} 100.0
# HELP sglang:token_usage The token usage
# TYPE sglang:token_usage gauge
sglang:token_usage{model_name="meta-llama/Llama-3.1-8B-Instruct"} 0.28
# HELP sglang:num_running_reqs The number of running requests.
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{model_name="meta-llama/Llama-3.1-8B-Instruct"} 12.0
# HELP sglang:num_queue_reqs The number of requests in the waiting queue.
# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs{model_name="meta-llama/Llama-3.1-8B-Instruct"} 3.0
# HELP sglang:time_to_first_token_seconds Histogram of time to first token in seconds.
# TYPE sglang:time_to_first_token_seconds histogram
sglang:time_to_first_token_seconds_bucket{le="0.1",model_name="meta-llama/Llama-3.1-8B-Instruct"} %(b1)s
sglang:time_to_first_token_seconds_bucket{le="0.5",model_name="meta-llama/Llama-3.1-8B-Instruct"} %(b2)s
sglang:time_to_first_token_seconds_bucket{le="+Inf",model_name="meta-llama/Llama-3.1-8B-Instruct"} %(b2)s
sglang:time_to_first_token_seconds_sum{model_name="meta-llama/Llama-3.1-8B-Instruct"} 2.0
sglang:time_to_first_token_seconds_count{model_name="meta-llama/Llama-3.1-8B-Instruct"} %(b2)s
"""

TGI_TEXT = """# TYPE tgi_queue_size gauge
tgi_queue_size %(queue)s
# TYPE tgi_batch_current_size gauge
tgi_batch_current_size 8
# TYPE tgi_request_generated_tokens histogram
tgi_request_generated_tokens_bucket{le="10"} 1
tgi_request_generated_tokens_bucket{le="+Inf"} 4
tgi_request_generated_tokens_sum %(gen_sum)s
tgi_request_generated_tokens_count 4
# TYPE tgi_request_input_length histogram
tgi_request_input_length_bucket{le="+Inf"} 4
tgi_request_input_length_sum 400
tgi_request_input_length_count 4
"""

DCGM_TEXT = """# HELP DCGM_FI_DEV_SM_CLOCK SM clock frequency (in MHz).
# TYPE DCGM_FI_DEV_SM_CLOCK gauge
DCGM_FI_DEV_SM_CLOCK{gpu="0",UUID="GPU-aaa",device="nvidia0",modelName="NVIDIA H200",Hostname="h"} 1980
# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).
# TYPE DCGM_FI_DEV_GPU_UTIL gauge
DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-aaa",device="nvidia0",modelName="NVIDIA H200",Hostname="h"} 97
# HELP DCGM_FI_DEV_FB_USED Framebuffer memory used (in MiB).
# TYPE DCGM_FI_DEV_FB_USED gauge
DCGM_FI_DEV_FB_USED{gpu="0",UUID="GPU-aaa",device="nvidia0",modelName="NVIDIA H200",Hostname="h"} 1024
# HELP DCGM_FI_DEV_POWER_USAGE Power draw (in W).
# TYPE DCGM_FI_DEV_POWER_USAGE gauge
DCGM_FI_DEV_POWER_USAGE{gpu="0",UUID="GPU-aaa",device="nvidia0",modelName="NVIDIA H200",Hostname="h"} 612.5
# HELP DCGM_FI_DEV_GPU_TEMP GPU temperature (in C).
# TYPE DCGM_FI_DEV_GPU_TEMP gauge
DCGM_FI_DEV_GPU_TEMP{gpu="0",UUID="GPU-aaa",device="nvidia0",modelName="NVIDIA H200",Hostname="h"} 61
# HELP DCGM_FI_PROF_SM_ACTIVE The ratio of cycles an SM has at least 1 warp assigned.
# TYPE DCGM_FI_PROF_SM_ACTIVE gauge
DCGM_FI_PROF_SM_ACTIVE{gpu="0",UUID="GPU-aaa",device="nvidia0",modelName="NVIDIA H200",Hostname="h"} 0.75
# HELP DCGM_FI_PROF_PCIE_RX_BYTES The rate of data received over the PCIe bus.
# TYPE DCGM_FI_PROF_PCIE_RX_BYTES counter
DCGM_FI_PROF_PCIE_RX_BYTES{gpu="0",UUID="GPU-aaa",device="nvidia0",modelName="NVIDIA H200",Hostname="h"} 2500000000
# HELP DCGM_FI_PROF_PCIE_TX_BYTES The rate of data transmitted over the PCIe bus.
# TYPE DCGM_FI_PROF_PCIE_TX_BYTES gauge
DCGM_FI_PROF_PCIE_TX_BYTES{gpu="0",UUID="GPU-aaa",device="nvidia0",modelName="NVIDIA H200",Hostname="h"} 1250000000
# HELP DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION Total energy consumption since boot (in mJ).
# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter
DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{gpu="0",UUID="GPU-aaa",device="nvidia0",modelName="NVIDIA H200",Hostname="h"} 123456789
"""
