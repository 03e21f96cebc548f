"""The answer to a non-streaming request: one JSON body when the answer is complete
(or the fault's broken one)."""

from __future__ import annotations

from zerohop.core.records import INCOMPLETE_STREAM, OK, PROTOCOL_ERROR
from zerohop.sim.answers.api_shapes import error_body
from zerohop.sim.answers.tokens import generated_text
from zerohop.sim.sequence import EngineError, Sequence
from zerohop.sim.serving.http_server import chunk
from zerohop.sim.serving.response_base import ResponseBase


class BufferedResponse(ResponseBase):
    """A non-streaming request: one JSON body when the answer is complete."""

    __slots__ = ()

    def on_token(
        self, seq: Sequence, scheduled_ns: int, finished: bool, written_ns: int
    ) -> None:
        if seq.num_output == 1:
            self.first_write_ns = None  # set at the real write below
        if not finished:
            return
        reason = seq.finish_reason or "length"
        greedy = self.ctx.greedy
        text = (generated_text(self.offset, seq.num_output) if greedy is None
                else greedy.text(seq.num_output))
        name = self.fault_name
        if name == "oversized_chunk" and self.ctx.fault is not None:
            text += " " + "x" * self.ctx.fault.integer("bytes")
        body = self.shape.final_body(text, seq.prompt_tokens, seq.num_output, reason,
                                     seq.num_cached)
        if greedy is not None:
            body = greedy.with_logprobs(body, seq.num_output)
        if name == "stream_error" and self.ctx.fault is not None:
            kind = self.ctx.fault.text("type")
            body = error_body(self.shape.api, 500, self.ctx.fault.text("message"), kind)
            self.conn.send(500, body, extra_headers=self.ctx.extra_headers)
            self._note_write(scheduled_ns)
            self._record(f"http_{500}", status=500, error_type=kind)
            return
        if name in ("drop_mid", "reset", "missing_terminator"):
            head = self.conn.start_chunked(200, b"application/json", self.ctx.extra_headers)
            self.conn.write(head + chunk(body[: len(body) // 2]))
            self._note_write(scheduled_ns)
            self._record(INCOMPLETE_STREAM, status=200)
            self.conn.on_lost = None
            if name == "reset":
                self.conn.reset()
            else:
                self.conn.close()
            return
        if self.ctx.prefill_leg is not None:
            body = self.ctx.prefill_leg.answer(body, seq, self.engine.pool.block_size)
        if name in ("invalid_json", "malformed_sse"):
            body = body[: len(body) // 2]
        self.conn.send(200, body, extra_headers=self._server_timing())
        self._note_write(scheduled_ns)
        broken = name in ("invalid_json", "malformed_sse")
        self._record(PROTOCOL_ERROR if broken else OK, status=200)

    def on_error(self, seq: Sequence, error: EngineError) -> None:
        body = error_body(self.shape.api, error.status, error.message, error.error_type)
        self.conn.send(error.status, body, extra_headers=self.ctx.extra_headers)
        self._record(f"http_{error.status}", status=error.status, error_type=error.error_type)
