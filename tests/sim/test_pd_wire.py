"""Disaggregated prefill/decode on two embedded targets, driven as a PD router drives
them (the prefill leg, then the decode leg with the prefill's kv_transfer_params):
per request, the TTFT split read off the decode's Server-Timing is each target's
ground truth, the transfer is the model's size ÷ bandwidth + latency, and the parts
add up to no more than the client's TTFT."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from zerohop.analysis.server.pd_split import pd_parts_ms, pd_request_id
from zerohop.sim.cost_model.profiles import load_profiles
from zerohop.sim.launcher import SimProcess, start_sim
from zerohop.sim.pd_roles import kv_transfer_ms

from .conftest import MODEL
from .wire import RawResponse, request

pytestmark = pytest.mark.integration

BANDWIDTH_GBPS, LATENCY_MS = 20.0, 1.0
# what the router adds to the prefill leg (facts from vllm-router 0.1's PD mode)
PREFILL_EXTRAS = {"stream": False, "max_tokens": 1, "min_tokens": 1, "logprobs": False,
                  "no_stop_trim": True, "ignore_eos": False, "skip_special_tokens": True,
                  "separate_reasoning": True,
                  "kv_transfer_params": {"do_remote_decode": True, "do_remote_prefill": False,
                                         "remote_engine_id": None, "remote_block_ids": None,
                                         "remote_host": None, "remote_port": None}}


@pytest.fixture(scope="module")
def pair() -> Iterator[tuple[SimProcess, SimProcess]]:
    with start_sim(["--seed", "3", "--pd-role", "prefill"]) as prefill, \
            start_sim(["--seed", "3", "--pd-role", "decode", "--kv-bandwidth-gbps",
                       str(BANDWIDTH_GBPS), "--kv-latency-ms", str(LATENCY_MS)]) as decode:
        yield prefill, decode


def _first_token_at(response: RawResponse) -> float:
    """When the read holding the stream's first token (its second data event: the
    first is the role's) arrived."""
    seen = 0
    for at, data in response.reads:
        seen += data.count(b"data: ")
        if seen >= 2:
            return at
    raise AssertionError(f"no token in {response.body[:200]!r}")


def _pd_request(prefill: SimProcess, decode: SimProcess, words: int
                ) -> tuple[str, float, RawResponse, dict]:
    rid = f"pd-{uuid.uuid4().hex}"
    body = {"model": MODEL, "messages": [{"role": "user", "content": f"{rid} " + "word " * words}],
            "max_tokens": 6, "stream": True}
    first = request(prefill.url, "/v1/chat/completions", {**body, **PREFILL_EXTRAS},
                    headers={"x-request-id": rid}, timeout=30)
    assert first.status == 200, first.body
    params = first.json()["kv_transfer_params"]
    second = request(decode.url, "/v1/chat/completions", {**body, "kv_transfer_params": params},
                     headers={"x-request-id": rid}, timeout=30)
    assert second.status == 200, second.body
    return rid, (_first_token_at(second) - first.sent_at) * 1e3, second, params


def test_each_part_of_ttft_is_the_targets_ground_truth(
        pair: tuple[SimProcess, SimProcess]) -> None:
    prefill, decode = pair
    per_token = load_profiles().model("llama-3-8b").kv_bytes_per_token
    sizes = [50, 400, 1500, 3000] * 3
    with ThreadPoolExecutor(3) as pool:
        results = list(pool.map(lambda w: _pd_request(prefill, decode, w), sizes))
    for rid, ttft_ms, response, params in results:
        header = response.headers["server-timing"]
        parts = pd_parts_ms(header)
        assert parts is not None and set(parts) == {"prefill_queue", "prefill", "kv_transfer",
                                                     "decode_queue", "first_decode"}
        assert pd_request_id(header) == rid
        assert params["zerohop"]["request_id"] == rid
        p_truth = request(prefill.url, f"/zerohop/ground_truth?request_id={rid}").json()
        d_truth = request(decode.url, f"/zerohop/ground_truth?request_id={rid}").json()
        assert p_truth["pd_role"] == "prefill" and d_truth["pd_role"] == "decode"
        assert parts["prefill_queue"] == pytest.approx(p_truth["queue_ms"], abs=1e-3)
        assert parts["prefill"] == pytest.approx(p_truth["prefill_ms"], abs=1e-3)
        for name in ("kv_transfer", "decode_queue", "first_decode"):
            assert parts[name] == pytest.approx(d_truth[f"{name}_ms"], abs=1e-3), name
        prompt = d_truth["prompt_tokens"]
        assert prompt == p_truth["prompt_tokens"]
        assert parts["kv_transfer"] == pytest.approx(
            kv_transfer_ms(prompt, per_token, BANDWIDTH_GBPS, LATENCY_MS), abs=1e-3)
        assert d_truth["kv_bytes"] == prompt * per_token
        # prompts are unique (no prefix-cache hit) and the decode computed one token:
        # its first step (maybe batched with others) is far shorter than a 3,000-token
        # prompt's prefill
        if prompt > 2500:
            assert parts["first_decode"] < parts["prefill"]
        remainder = ttft_ms - sum(parts.values())
        assert remainder >= -0.5, (rid, ttft_ms, parts)


def test_a_pd_instance_serves_a_plain_request_as_a_plain_one(
        pair: tuple[SimProcess, SimProcess]) -> None:
    _, decode = pair
    body = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 3}
    response = request(decode.url, "/v1/chat/completions", body)
    assert response.status == 200
    assert "server-timing" not in response.headers
    assert "kv_transfer_params" not in response.json()


@pytest.mark.parametrize("fault, outcome", [
    ("stream_error;after=0;type=internal_error", "stream_error:internal_error"),
    ("slow_headers;s=0.2", "ok"),
])
def test_a_decode_whose_stream_fails_or_stalls_still_sends_its_head(
        pair: tuple[SimProcess, SimProcess], fault: str, outcome: str) -> None:
    """The decode holds its head until token 1: a stream that errs before it, or a
    stalled one, still answers (head, then the error or the tokens)."""
    _, decode = pair
    rid = f"pd-fault-{uuid.uuid4().hex}"
    body = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 3,
            "stream": True, "kv_transfer_params": {"do_remote_prefill": True}}
    response = request(decode.url, "/v1/chat/completions", body,
                       headers={"x-request-id": rid, "x-zerohop-fault": fault}, timeout=10)
    assert response.status == 200 and response.complete
    assert "kv_transfer;dur=" in response.headers["server-timing"]
    truth = request(decode.url, f"/zerohop/ground_truth?request_id={rid}").json()
    assert truth["outcome"] == outcome
