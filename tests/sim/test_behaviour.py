"""The sim behaves like a continuous-batching engine, seen from outside."""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from zerohop.sim.cost_model.profiles import Roofline, load_profiles
from zerohop.sim.launcher import SimProcess, start_sim

from .conftest import MODEL
from .wire import RawResponse, request

pytestmark = pytest.mark.integration
_PROMPT_STARTS = itertools.count(1)  # every prompt its own ids: no prefix-cache hit


def completion(
    sim: SimProcess,
    prompt_tokens: int,
    max_tokens: int,
    *,
    model: str = MODEL,
    path: str = "/v1/completions",
) -> RawResponse:
    start = next(_PROMPT_STARTS) * 1_000_000
    body = {
        "model": model,
        "prompt": list(range(start, start + prompt_tokens)),
        "max_tokens": max_tokens,
        "stream": True,
        "ignore_eos": True,
    }
    return request(sim.url, path, body, timeout=60)


def truth(sim: SimProcess, r: RawResponse) -> dict:
    rid = r.headers["x-request-id"]
    for _ in range(50):
        got = request(sim.url, f"/zerohop/ground_truth?request_id={rid}")
        if got.status == 200:
            return got.json()
        time.sleep(0.02)
    raise AssertionError(f"no ground truth for {rid}")


def metric_values(sim: SimProcess, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    text = request(sim.url, "/metrics").body.decode()
    out = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name:
                out[tuple(sorted(sample.labels.items()))] = sample.value
    return out


@pytest.mark.alone  # timing-sensitive: CI runs it with no test beside it
def test_ttft_grows_with_prompt_at_the_profile_prefill_rate(sim: SimProcess) -> None:
    book = load_profiles()
    roofline = Roofline(book.gpu("h100-sxm"), book.model("llama-3-8b"))
    short = truth(sim, completion(sim, 200, 2))["server_ttft_ms"]
    long = truth(sim, completion(sim, 6000, 2))["server_ttft_ms"]
    expected = (roofline.prefill_s(6000) - roofline.prefill_s(200)) * 1e3
    assert long - short == pytest.approx(expected, rel=0.2, abs=5.0)


def test_client_ttft_is_never_below_the_server_ttft(sim: SimProcess) -> None:
    r = completion(sim, 1000, 3)
    record = truth(sim, r)
    first_content = next(t for t, data in r.reads if b'"text":" ' in data)
    client_ttft_ms = (first_content - r.sent_at) * 1e3
    # The server stamps its write after the write returns, so on busy cores that stamp can
    # be late by any amount; the step's modelled end is a plan made before, and the write
    # never precedes it (the step clock is never early). Request arrival is stamped after
    # the bytes were read, never before the client sent them. Hence, on any machine:
    floor_ms = (record["scheduled_first_token_ts"] - record["arrival_ts"]) * 1e3
    assert client_ttft_ms >= floor_ms - 0.002  # ground truth is rounded to 1 µs
    assert record["server_ttft_ms"] >= floor_ms - 0.002
    assert record["completion_tokens"] == 3 and record["outcome"] == "ok"
    assert record["first_token_ts"] >= record["arrival_ts"] >= record["accepted_ts"]


@pytest.mark.alone  # timing-sensitive: CI runs it with no test beside it
def test_tpot_grows_with_batch_size() -> None:
    # a 1B model: short prefills, and at 2k context the KV reads of a batch of 40 outweigh
    # its 2.5 GB of weights, so decode steps get clearly longer
    def tpot_ms(record: dict) -> float:
        span = record["last_token_ts"] - record["first_token_ts"]
        return span * 1e3 / (record["completion_tokens"] - 1)

    with start_sim(["--model", "llama-3.2-1b"]) as small:
        model = "llama-3.2-1b"
        alone = tpot_ms(truth(small, completion(small, 2000, 30, model=model)))
        with ThreadPoolExecutor(40) as pool:
            responses = list(
                pool.map(lambda _: completion(small, 2000, 30, model=model), range(40))
            )
        batched = sorted(tpot_ms(truth(small, r)) for r in responses)
    assert batched[len(batched) // 2] > 1.3 * alone


@pytest.fixture(scope="module")
def small_sim() -> Iterator[SimProcess]:
    with start_sim(["--max-num-seqs", "4"]) as process:
        yield process


@pytest.fixture(scope="module")
def queue_sim() -> Iterator[SimProcess]:
    with start_sim(["--max-num-seqs", "1", "--max-queue", "3"]) as process:
        yield process


def test_overload_grows_the_queue_and_ttft(small_sim: SimProcess) -> None:
    waiting: list[float] = []
    running: list[float] = []
    with ThreadPoolExecutor(12) as pool:
        futures = [pool.submit(completion, small_sim, 100, 40) for _ in range(12)]
        # scraped until the queue is seen (or every request has ended without it)
        while not all(f.done() for f in futures):
            waiting += metric_values(small_sim, "vllm:num_requests_waiting").values()
            running += metric_values(small_sim, "vllm:num_requests_running").values()
            if max(waiting, default=0) >= 4 and max(running, default=0) == 4:
                break
        responses = [f.result() for f in futures]
    assert max(waiting, default=0) >= 4 and max(running, default=0) == 4
    assert all(r.status == 200 for r in responses)
    ttfts = sorted(truth(small_sim, r)["server_ttft_ms"] for r in responses)
    assert ttfts[-1] > 3 * ttfts[0]  # the last admitted waited for whole answers


@pytest.mark.parametrize(
    ("path", "status", "kind"),
    [
        ("/v1/completions", 503, "ServiceUnavailableError"),
        ("/v1/messages", 529, "overloaded_error"),
    ],
)
def test_queue_limit_rejects_with_the_api_shape(
    queue_sim: SimProcess, path: str, status: int, kind: str
) -> None:
    def send(_: int) -> RawResponse:
        if path == "/v1/messages":
            body = {
                "model": MODEL,
                "max_tokens": 30,
                "stream": True,
                "ignore_eos": True,
                "messages": [{"role": "user", "content": "hi"}],
            }
            return request(queue_sim.url, path, body, timeout=60)
        return completion(queue_sim, 50, 30)

    with ThreadPoolExecutor(10) as pool:
        responses = list(pool.map(send, range(10)))
    rejected = [r for r in responses if r.status == status]
    served = [r for r in responses if r.status == 200]
    assert rejected and len(served) >= 4  # one running + the 3 queued
    assert len(rejected) + len(served) == 10
    assert rejected[0].json()["error"]["type"] == kind


@pytest.fixture(scope="module")
def lora_sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimProcess]:
    config = tmp_path_factory.mktemp("lora") / "sim.yaml"
    config.write_text(
        "models:\n  - lora: {adapters: [sql-lora, chat-lora], max_loras: 1, load_ms: 60}\n"
    )
    with start_sim(["--config", str(config)]) as process:
        yield process


@pytest.mark.alone  # timing-sensitive: CI runs it with no test beside it
def test_lora_adapters_listed_and_cold_is_slower_than_warm(lora_sim: SimProcess) -> None:
    models = request(lora_sim.url, "/v1/models").json()["data"]
    parents = {m["id"]: m["parent"] for m in models}
    assert parents["sql-lora"] == "meta-llama/Meta-Llama-3-8B-Instruct"
    cold = truth(lora_sim, completion(lora_sim, 100, 2, model="sql-lora"))["server_ttft_ms"]
    warm = truth(lora_sim, completion(lora_sim, 100, 2, model="sql-lora"))["server_ttft_ms"]
    assert cold - warm >= 40  # load_ms is 60
    info = metric_values(lora_sim, "vllm:lora_requests_info")
    assert any(dict(labels)["max_lora"] == "1" for labels in info)


def test_metrics_follow_the_engine(sim: SimProcess) -> None:
    before = metric_values(sim, "vllm:generation_tokens_total")
    completion(sim, 300, 25)
    after = metric_values(sim, "vllm:generation_tokens_total")
    key = (("model_name", "meta-llama/Meta-Llama-3-8B-Instruct"),)
    assert after[key] - before[key] == 25
    text = request(sim.url, "/metrics").body.decode()
    families = {f.name: f for f in text_string_to_metric_families(text)}
    for name in [
        "vllm:num_requests_running",
        "vllm:num_requests_waiting",
        "vllm:kv_cache_usage_perc",
        "vllm:prompt_tokens",
        "vllm:num_preemptions",
        "vllm:time_to_first_token_seconds",
        "DCGM_FI_DEV_GPU_UTIL",
        "DCGM_FI_DEV_FB_USED",
        "DCGM_FI_DEV_FB_FREE",
        "DCGM_FI_PROF_PCIE_RX_BYTES",
        "DCGM_FI_PROF_PCIE_TX_BYTES",
        "DCGM_FI_DEV_POWER_USAGE",
        "DCGM_FI_DEV_GPU_TEMP",
        "DCGM_FI_DEV_SM_CLOCK",
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
        "zerohop_sim_loop_lag_seconds",
    ]:
        assert name in families, name
    util = families["DCGM_FI_DEV_GPU_UTIL"].samples[0]
    assert util.labels["gpu"] == "0" and util.value > 0  # busy a moment ago
    power = families["DCGM_FI_DEV_POWER_USAGE"].samples[0].value
    assert 70 < power <= 700
    energy = families["DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"]
    assert energy.type == "counter" and energy.samples[0].value > 0  # mJ since start
    buckets = [
        s
        for s in families["vllm:time_to_first_token_seconds"].samples
        if s.name.endswith("_bucket")
    ]
    assert [s.labels["le"] for s in buckets][:3] == ["0.001", "0.005", "0.01"]


def test_a_finished_request_splits_into_queue_prefill_and_decode(sim: SimProcess) -> None:
    """vLLM's phase histograms, observed at finish: one observation each, and the three
    phases add up to the request's server-side E2E."""
    names = [f"vllm:request_{p}_time_seconds" for p in ("queue", "prefill", "decode")]
    key = (("model_name", "meta-llama/Meta-Llama-3-8B-Instruct"),)

    def reading() -> dict[str, float]:
        return {f"{n}_{part}": metric_values(sim, f"{n}_{part}")[key]
                for n in [*names, "vllm:e2e_request_latency_seconds"]
                for part in ("sum", "count")}

    before = reading()
    completion(sim, 200, 20)
    after = reading()
    added = {name: after[name] - before[name] for name in after}
    assert all(added[f"{n}_count"] == 1 for n in names)
    phases = sum(added[f"{n}_sum"] for n in names)
    assert phases == pytest.approx(added["vllm:e2e_request_latency_seconds_sum"], abs=1e-5)
    assert added["vllm:request_prefill_time_seconds_sum"] > 0
    assert added["vllm:request_decode_time_seconds_sum"] > 0


def test_ground_truth_file_is_flushed(sim: SimProcess, ground_truth_path: Path) -> None:
    r = completion(sim, 10, 2)
    rid = r.headers["x-request-id"]
    path = ground_truth_path
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        if path.exists() and rid in path.read_text():
            break
        time.sleep(0.1)
    line = next(ln for ln in path.read_text().splitlines() if rid in ln)
    record = json.loads(line)
    for field in [
        "request_id",
        "api",
        "model",
        "arrival_ts",
        "first_token_ts",
        "last_token_ts",
        "prompt_tokens",
        "completion_tokens",
        "outcome",
        "server_ttft_ms",
        "max_emission_lag_ms",
    ]:
        assert field in record
    assert record["api"] == "completions" and record["prompt_tokens"] == 10
