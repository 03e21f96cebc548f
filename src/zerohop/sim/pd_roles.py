"""Prefill/decode disaggregation: the embedded target as a prefill or a decode instance.

vLLM's disaggregated serving (the NIXL connector, behind vllm-router's PD mode) runs
a request twice: the prefill instance gets it with `max_tokens: 1` and
`kv_transfer_params.do_remote_decode: true`, computes the prompt and answers with
`kv_transfer_params` naming where its KV blocks are; the decode instance gets the
original request with those params (`do_remote_prefill: true`), pulls the blocks and
decodes, computing only the prompt's last token.

Here the pull is modelled: prompt tokens × the model's KV bytes per token ÷ the link's
bandwidth, plus a fixed latency (`kv_transfer_ms`). The prefill instance adds its own
queue and prefill times to the params (`zerohop` key), the router relays them verbatim,
and the decode instance sends them back in `Server-Timing` with the transfer and its
own queue and first step, so a client can split each request's TTFT
(`analysis.pd_split`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from zerohop.sim.sequence import Sequence

PREFILL_ROLE = "prefill"
DECODE_ROLE = "decode"
DEFAULT_KV_BANDWIDTH_GBPS = 50.0  # GB/s: one 400 Gb/s RDMA NIC
DEFAULT_KV_LATENCY_MS = 0.5  # the pull's setup: a NIXL handshake and its RDMA reads
ZEROHOP_KEY = "zerohop"  # our own fields inside kv_transfer_params
MAX_BLOCK_IDS = 8  # remote_block_ids: the first few (the sim keeps no real block ids)


def kv_transfer_ms(prompt_tokens: int, kv_bytes_per_token: int, bandwidth_gbps: float,
                   latency_ms: float) -> float:
    """The modelled KV pull: the prompt's KV bytes over the link, plus its latency."""
    return prompt_tokens * kv_bytes_per_token / (bandwidth_gbps * 1e9) * 1e3 + latency_ms


def _ms(later_ns: int | None, earlier_ns: int | None) -> float | None:
    if later_ns is None or earlier_ns is None:
        return None
    return round((later_ns - earlier_ns) / 1e6, 4)


def is_prefill_leg(body: dict[str, Any]) -> bool:
    """A request the router sends to a prefill instance."""
    params = body.get("kv_transfer_params")
    return isinstance(params, dict) and bool(params.get("do_remote_decode"))


@dataclass(frozen=True)
class PrefillLeg:
    """A prefill instance's request: it answers with the params a decode pulls by."""

    engine_id: str
    host: str
    port: int

    def answer(self, body: bytes, seq: Sequence, block_size: int) -> bytes:
        """The prefill's JSON answer with its top-level `kv_transfer_params` added."""
        document = json.loads(body)
        document["kv_transfer_params"] = self.kv_transfer_params(seq, block_size)
        return json.dumps(document, separators=(",", ":")).encode()

    def kv_transfer_params(self, seq: Sequence, block_size: int) -> dict[str, Any]:
        blocks = min(MAX_BLOCK_IDS, -(-seq.prompt_tokens // block_size))
        return {
            "do_remote_prefill": True,
            "do_remote_decode": False,
            "remote_engine_id": self.engine_id,
            "remote_block_ids": list(range(blocks)),
            "remote_host": self.host,
            "remote_port": self.port,
            ZEROHOP_KEY: {
                "request_id": seq.request_id,
                "prompt_tokens": seq.prompt_tokens,
                "queue_ms": prefill_queue_ms(seq),
                "prefill_ms": prefill_ms(seq),
            },
        }


def prefill_queue_ms(seq: Sequence) -> float | None:
    return _ms(seq.first_scheduled_ns, seq.arrival_ns)


def prefill_ms(seq: Sequence) -> float | None:
    """First scheduled to the step that sampled token 1 (vLLM's prefill phase)."""
    return _ms(seq.first_token_ns, seq.first_scheduled_ns)


@dataclass(frozen=True)
class DecodeLeg:
    """A decode instance's request: its KV arrives from the prefill instance."""

    transfer_ms: float
    kv_bytes: int
    prefill_request_id: str | None
    prefill_queue_ms: float | None
    prefill_ms: float | None

    @classmethod
    def from_body(cls, body: dict[str, Any], prompt_tokens: int, kv_bytes_per_token: int,
                  bandwidth_gbps: float, latency_ms: float) -> DecodeLeg | None:
        """The leg of a request with `kv_transfer_params.do_remote_prefill`; None for a
        request a plain instance would serve."""
        params = body.get("kv_transfer_params")
        if not isinstance(params, dict) or not params.get("do_remote_prefill"):
            return None
        ours = params.get(ZEROHOP_KEY)
        ours = ours if isinstance(ours, dict) else {}
        return cls(
            transfer_ms=round(kv_transfer_ms(prompt_tokens, kv_bytes_per_token,
                                             bandwidth_gbps, latency_ms), 4),
            kv_bytes=prompt_tokens * kv_bytes_per_token,
            prefill_request_id=_text(ours.get("request_id")),
            prefill_queue_ms=_number(ours.get("queue_ms")),
            prefill_ms=_number(ours.get("prefill_ms")),
        )

    @property
    def transfer_ns(self) -> int:
        return int(self.transfer_ms * 1e6)

    def decode_queue_ms(self, seq: Sequence) -> float | None:
        """From the transfer's end (when the sequence joins the queue) to its admission."""
        return _ms(seq.first_scheduled_ns, seq.arrival_ns + self.transfer_ns)

    def first_decode_ms(self, seq: Sequence) -> float | None:
        """The step that computed the prompt's last token and sampled token 1."""
        return _ms(seq.first_token_ns, seq.first_scheduled_ns)

    def server_timing(self, seq: Sequence) -> bytes:
        """The Server-Timing header's value: each part of the TTFT this path saw."""
        parts = [(name, value) for name, value in (
            ("prefill_queue", self.prefill_queue_ms), ("prefill", self.prefill_ms),
            ("kv_transfer", self.transfer_ms), ("decode_queue", self.decode_queue_ms(seq)),
            ("first_decode", self.first_decode_ms(seq))) if value is not None]
        text = ", ".join(f"{name};dur={value:.4f}" for name, value in parts)
        if self.prefill_request_id is not None:
            rid = self.prefill_request_id.replace("\\", "").replace('"', "")
            text += f', pd;desc="{rid}"'
        return text.encode("latin-1", "replace")

    def headers(self, extra: list[tuple[bytes, bytes]],
                seq: Sequence) -> list[tuple[bytes, bytes]]:
        """The reply's headers: `extra` and this path's Server-Timing."""
        return [*extra, (b"server-timing", self.server_timing(seq))]

    def ground_truth(self, seq: Sequence) -> dict[str, Any]:
        return {
            "pd_role": DECODE_ROLE,
            "kv_transfer_ms": self.transfer_ms,
            "kv_bytes": self.kv_bytes,
            "prefill_request_id": self.prefill_request_id,
            "prefill_queue_ms": self.prefill_queue_ms,
            "prefill_ms": self.prefill_ms,
            "decode_queue_ms": self.decode_queue_ms(seq),
            "first_decode_ms": self.first_decode_ms(seq),
        }


def prefill_ground_truth(seq: Sequence) -> dict[str, Any]:
    return {"pd_role": PREFILL_ROLE, "prefill_ms": prefill_ms(seq)}


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def pd_legs(role: str | None, body: dict[str, Any], *, stream: bool, prompt_tokens: int,
            kv_bytes_per_token: int, bandwidth_gbps: float, latency_ms: float,
            engine_id: str, host: str, port: int) -> dict[str, Any]:
    """A PD instance's part in one request, as `ResponseContext` fields; none for a
    request without kv_transfer_params, which a PD instance serves as a plain one."""
    if role == PREFILL_ROLE and not stream and is_prefill_leg(body):
        return {"prefill_leg": PrefillLeg(engine_id, host, port)}
    if role == DECODE_ROLE:
        leg = DecodeLeg.from_body(body, prompt_tokens, kv_bytes_per_token, bandwidth_gbps,
                                  latency_ms)
        if leg is not None:
            return {"decode_leg": leg}
    return {}
