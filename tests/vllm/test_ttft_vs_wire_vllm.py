"""zerohop's TTFT against the wire on the vLLM tier's server: the check of
tests/loadgen/test_ttft_vs_wire.py (tests/wire_ttft.py: median and p99 of
|zerohop − wire| within 3× of docs/ttft-vs-vllm-bench.md's figures plus the floor a
plain kernel-stamped client reached in the same run), on a server zerohop did not
write and whose role-only chunk comes in the same pass as the first content."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.vllm_cpu import SERVED_MODEL_NAME, VllmServer
from tests.wire_ttft import ProbeClient, measure_against_wire

DURATION_S = 12
RATE_RPS = 6
WORKLOAD = f"""\
kind: short_query_flood
name: wire
input_tokens: 32
max_tokens: 8
ignore_eos: true
temperature: 0.0
load: {{kind: open, rate_rps: {RATE_RPS}, arrival: poisson}}
"""
FLOOR = ProbeClient("floor", requests=DURATION_S * RATE_RPS, interval_s=1 / RATE_RPS)
BODY = {"model": SERVED_MODEL_NAME, "stream": True, "max_tokens": 8, "ignore_eos": True,
        "temperature": 0.0,
        "messages": [{"role": "user", "content": "how late is the first token " * 4}]}


@pytest.mark.alone  # timing-sensitive: CI runs it with no test beside it
def test_zerohop_ttft_matches_the_wire_on_vllm(vllm_server: VllmServer, tmp_path: Path
                                               ) -> None:
    workload = tmp_path / "wire.yaml"
    workload.write_text(WORKLOAD)
    # the fixture has confined this process, and so the clients, to the CPUs vLLM is not on
    judged = measure_against_wire(vllm_server.port, vllm_server.url, SERVED_MODEL_NAME,
                                  workload, DURATION_S, [FLOOR], BODY, tmp_path, None)
    assert judged["zerohop"].requests >= 0.5 * RATE_RPS * DURATION_S
    assert judged["zerohop"].judgeable, f"the machine was too busy: {judged['zerohop']}"
    assert judged["zerohop"].holds, judged["zerohop"]
