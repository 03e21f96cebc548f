"""The PD roles' arithmetic: the modelled KV transfer, the params a prefill answers
with and the Server-Timing a decode sends."""

from __future__ import annotations

import pytest

from zerohop.analysis.server.pd_split import pd_parts_ms, pd_request_id
from zerohop.sim.cost_model.profiles import load_profiles
from zerohop.sim.pd_roles import DecodeLeg, PrefillLeg, is_prefill_leg, kv_transfer_ms
from zerohop.sim.sequence import NULL_SINK, Sequence

pytestmark = pytest.mark.unit


def _seq(**kwargs: object) -> Sequence:
    base: dict[str, object] = {"request_id": "r1", "prompt_tokens": 1000, "target_output": 8,
                               "max_tokens": 8, "sink": NULL_SINK, "arrival_ns": 1_000_000}
    return Sequence(**{**base, **kwargs})  # type: ignore[arg-type]


def test_the_transfer_is_size_over_bandwidth_plus_latency() -> None:
    # 1,000 tokens of 131,072 B over 50 GB/s: 2.62144 ms, plus 0.5 ms
    assert kv_transfer_ms(1000, 131_072, 50.0, 0.5) == pytest.approx(3.12144)
    assert kv_transfer_ms(0, 131_072, 50.0, 0.5) == pytest.approx(0.5)


def test_the_decode_leg_prices_the_profile_kv_bytes() -> None:
    per_token = load_profiles().model("llama-3-8b").kv_bytes_per_token
    body = {"kv_transfer_params": {"do_remote_prefill": True, "zerohop": {
        "request_id": "p1", "queue_ms": 1.5, "prefill_ms": 20.25}}}
    leg = DecodeLeg.from_body(body, 1000, per_token, 25.0, 1.0)
    assert leg is not None
    assert leg.kv_bytes == 1000 * per_token
    assert leg.transfer_ms == pytest.approx(1000 * per_token / 25e9 * 1e3 + 1.0, abs=1e-4)
    assert (leg.prefill_request_id, leg.prefill_queue_ms, leg.prefill_ms) == ("p1", 1.5, 20.25)


def test_a_request_without_remote_prefill_has_no_decode_leg() -> None:
    assert DecodeLeg.from_body({}, 10, 100, 50.0, 0.5) is None
    assert DecodeLeg.from_body({"kv_transfer_params": {"do_remote_decode": True}},
                               10, 100, 50.0, 0.5) is None
    assert is_prefill_leg({"kv_transfer_params": {"do_remote_decode": True}})
    assert not is_prefill_leg({"kv_transfer_params": None})


def test_the_decode_server_timing_reads_back_as_its_parts() -> None:
    leg = DecodeLeg(transfer_ms=3.0, kv_bytes=1, prefill_request_id='p"1',
                    prefill_queue_ms=1.25, prefill_ms=20.5)
    # transfer done at 1 ms + 3 ms; admitted 0.5 ms later; token 1 after a 7 ms step
    seq = _seq(first_scheduled_ns=4_500_000, first_token_ns=11_500_000)
    header = leg.server_timing(seq).decode()
    assert pd_parts_ms(header) == {"prefill_queue": 1.25, "prefill": 20.5, "kv_transfer": 3.0,
                                   "decode_queue": 0.5, "first_decode": 7.0}
    assert pd_request_id(header) == "p1"  # a quote in the id cannot break the header
    truth = leg.ground_truth(seq)
    assert truth["decode_queue_ms"] == 0.5 and truth["first_decode_ms"] == 7.0


def test_the_prefill_params_name_its_times() -> None:
    seq = _seq(first_scheduled_ns=3_000_000, first_token_ns=23_000_000)
    params = PrefillLeg("eng", "127.0.0.1", 8100).kv_transfer_params(seq, 16)
    assert params["do_remote_prefill"] is True and params["do_remote_decode"] is False
    assert (params["remote_host"], params["remote_port"]) == ("127.0.0.1", 8100)
    assert params["remote_block_ids"] == list(range(8))
    assert params["zerohop"] == {"request_id": "r1", "prompt_tokens": 1000,
                                 "queue_ms": 2.0, "prefill_ms": 20.0}
