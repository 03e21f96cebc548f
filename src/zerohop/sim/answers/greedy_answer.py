"""A seeded temperature-0 answer on the embedded target: greedy decoding, and the
batch-dependent divergence that the answer probe (`zerohop run --answer-probe`) looks for.

A real engine decodes a temperature-0 request greedily: alone, the same prompt gets
the same words every time. The sim's ordinary words follow the request id
(tokens.word_offset), so a chat or completions request that asks for temperature 0
with a `seed` gets its words, and its length, from its prompt and seed instead.

The modelled divergence (`--answer-divergence S`, `SimConfig.answer_divergence`):
such a request that arrives while the engine holds another sequence (so it will not
be decoded in a batch of one) is, with probability S, answered with one token changed
at a position drawn uniformly in its answer, the greedy continuation following that
token (every word after it shifts too). Before that token its logprobs move by at most
`LOGPROB_DRIFT` (a batch's different reduction order); from it on they are the other
words'. Both draws are seeded by (sim seed, prompt, seed), so the same prompts flip at
the same places on every run with the same seed. A non-streamed answer only: a stream
keeps the plain greedy words.

Logprobs are modelled too: each token's is drawn in [-2, -0.01] from (prompt, seed,
position). A request that asks (`logprobs`) gets them in OpenAI's non-streamed shapes:
chat `choices[0].logprobs.content[]` entries `{token, logprob, bytes, top_logprobs}`,
completions `choices[0].logprobs` `{tokens, token_logprobs, top_logprobs, text_offset}`.
"""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import dataclass, replace
from typing import Any

from zerohop.sim.answers.body_forms import body_form
from zerohop.sim.answers.tokens import WORD_PIECES

LOGPROB_DRIFT = 0.005  # the largest logprob change before a flipped token (modelled)
_LOGPROB_RANGE = (0.01, 2.0)  # -logprob of every modelled token lies in it


@dataclass(frozen=True, slots=True)
class GreedyAnswer:
    """One greedy answer: `key` seeds its draws (its prompt and seed), `offset` is where
    its words start; `flip_at` the token that differs from the answer alone (None: as
    alone) and `shift` how far the words from it on move; `logprobs_form` the shape of the
    logprobs the request asked for, chat's or completions' (None: not asked)."""

    key: str
    offset: int
    flip_at: int | None = None
    shift: int = 0
    logprobs_form: str | None = None

    def piece(self, index: int) -> str:
        moved = self.shift if self.flip_at is not None and index >= self.flip_at else 0
        return WORD_PIECES[(self.offset + index + moved) % len(WORD_PIECES)]

    def text(self, count: int) -> str:
        return "".join(self.piece(i) for i in range(count))

    def logprob(self, index: int) -> float:
        """The modelled logprob of token `index` as this answer has it."""
        if self.flip_at is not None and index >= self.flip_at:
            return _draw_logprob(self.key, index, "flipped")
        base = _draw_logprob(self.key, index, "alone")
        if self.flip_at is None:
            return base
        drift = LOGPROB_DRIFT * (2.0 * _unit(self.key, index, "drift") - 1.0)
        return min(base + drift, 0.0)

    def diverged(self, answer_tokens: int, *, share: float, sim_seed: int) -> GreedyAnswer:
        """This answer as decoded in a batch of several: with probability `share`, one
        token (at a drawn position among `answer_tokens`) and the words after it differ."""
        rng = _rng(f"{sim_seed}:{self.key}:divergence")
        if share <= 0 or answer_tokens < 1 or not rng.random() < share:
            return self
        return replace(self, flip_at=rng.randrange(answer_tokens),
                       shift=rng.randrange(1, len(WORD_PIECES)))

    def with_logprobs(self, body: bytes, count: int) -> bytes:
        """The final body with this answer's logprobs in its first choice (unchanged when
        the request asked for none)."""
        if self.logprobs_form is None:
            return body
        document = json.loads(body)
        document["choices"][0]["logprobs"] = self._logprobs(count)
        return json.dumps(document, separators=(",", ":")).encode()

    def _logprobs(self, count: int) -> dict[str, Any]:
        pieces = [self.piece(i) for i in range(count)]
        values = [round(self.logprob(i), 6) for i in range(count)]
        if self.logprobs_form == "chat":
            return {"content": [
                {"token": p, "logprob": v, "bytes": list(p.encode()),
                 "top_logprobs": [{"token": p, "logprob": v, "bytes": list(p.encode())}]}
                for p, v in zip(pieces, values, strict=True)]}
        offsets, at = [], 0
        for p in pieces:
            offsets.append(at)
            at += len(p)
        return {"tokens": pieces, "token_logprobs": values,
                "top_logprobs": [{p: v} for p, v in zip(pieces, values, strict=True)],
                "text_offset": offsets}


def greedy_answer(form: str, body: dict[str, Any]) -> GreedyAnswer | None:
    """The greedy answer of a request that asks for temperature 0 with an integer `seed`,
    in a body form that has greedy answers (chat, completions: its entry's `greedy`);
    None for any other request (its words follow its id)."""
    reading = body_form(form).greedy
    if reading is None:
        return None
    seed = body.get("seed")
    temperature = body.get("temperature")
    if isinstance(seed, bool) or not isinstance(seed, int):
        return None
    if isinstance(temperature, bool) or temperature not in (0, 0.0):
        return None
    prompt = body.get(reading.prompt_key)
    key = hashlib.blake2b(json.dumps([prompt, seed], sort_keys=True).encode(),
                          digest_size=12).hexdigest()
    wants = reading.wants_logprobs(body.get("logprobs"))
    return GreedyAnswer(key=key, offset=int(key[:8], 16) % len(WORD_PIECES),
                        logprobs_form=reading.logprobs_shape if wants else None)


def _rng(text: str) -> random.Random:
    digest = hashlib.blake2b(text.encode(), digest_size=8).digest()
    return random.Random(int.from_bytes(digest, "little"))


def _unit(key: str, index: int, salt: str) -> float:
    return _rng(f"{key}:{index}:{salt}").random()


def _draw_logprob(key: str, index: int, salt: str) -> float:
    low, high = _LOGPROB_RANGE
    return -(low + (high - low) * _unit(key, index, salt))
