"""The speculative-decoding series, as vLLM V1 and SGLang expose them, become canonical
rates and gauges (telemetry/canonical.py)."""

from __future__ import annotations

import json

import pytest

from zerohop.telemetry.prometheus import PromDeriver, parse_exposition

pytestmark = pytest.mark.unit

SOURCE = "prom:127.0.0.1:8000"


def _vllm(drafts: int, draft_tokens: int, accepted: int, pos: tuple[int, int]) -> str:
    label = 'engine="0",model_name="m"'
    return "\n".join([
        "# TYPE vllm:spec_decode_num_drafts counter",
        f"vllm:spec_decode_num_drafts_total{{{label}}} {drafts}",
        "# TYPE vllm:spec_decode_num_draft_tokens counter",
        f"vllm:spec_decode_num_draft_tokens_total{{{label}}} {draft_tokens}",
        "# TYPE vllm:spec_decode_num_accepted_tokens counter",
        f"vllm:spec_decode_num_accepted_tokens_total{{{label}}} {accepted}",
        "# TYPE vllm:spec_decode_num_accepted_tokens_per_pos counter",
        f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{{label},position="0"}} {pos[0]}',
        f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{{label},position="1"}} {pos[1]}',
    ]) + "\n"


def test_vllm_counters_become_per_second_rates_per_position() -> None:
    deriver = PromDeriver(SOURCE)
    assert not [r for r in deriver.feed(10.0, parse_exposition(_vllm(0, 0, 0, (0, 0))))
                if r.source == SOURCE]
    rows = [r for r in deriver.feed(12.0, parse_exposition(_vllm(100, 200, 150, (90, 60))))
            if r.source == SOURCE]
    by_metric = {(r.metric, json.loads(r.labels).get("position")): r.value for r in rows}
    assert by_metric == {
        ("spec_drafts_per_s", None): 50.0,
        ("spec_draft_tokens_per_s", None): 100.0,
        ("spec_accepted_tokens_per_s", None): 75.0,
        ("spec_accepted_tokens_per_pos_per_s", "0"): 45.0,
        ("spec_accepted_tokens_per_pos_per_s", "1"): 30.0,
    }


def test_sglang_acceptance_gauges_are_read_as_they_are() -> None:
    text = ("# TYPE sglang:spec_accept_length gauge\n"
            'sglang:spec_accept_length{model_name="m"} 2.75\n'
            "# TYPE sglang:spec_accept_rate gauge\n"
            'sglang:spec_accept_rate{model_name="m"} 0.58\n')
    rows = [r for r in PromDeriver(SOURCE).feed(1.0, parse_exposition(text))
            if r.source == SOURCE]
    assert {r.metric: r.value for r in rows} == {"spec_accept_length": 2.75,
                                                 "spec_accept_rate": 0.58}
