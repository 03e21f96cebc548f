"""The sim's deterministic tokenizer and output generator.

Counting rule (documented so clients can predict usage exactly):

* Text: one token per match of the regex ``\\w+|[^\\w\\s]`` — every run of word
  characters is one token, every other non-space character is one token, whitespace is
  free. ``"Hello, world!"`` is 4 tokens.
* Token-id prompts (``/v1/completions`` with a list of ints, or a list of such lists
  for the first prompt) count ``len(ids)``.
* Chat (``/v1/chat/completions``) and Anthropic messages add a fixed template overhead:
  ``CHAT_MESSAGE_OVERHEAD`` (4) tokens per message (role header and separators) and
  ``CHAT_REQUEST_OVERHEAD`` (3) tokens per request (the assistant primer). An Anthropic
  ``system`` prompt counts as one more message. An image part with base64 PNG data
  counts ``core.images.image_token_count`` of its size (``image_parts.py``); other
  non-text parts count ``NON_TEXT_PART_TOKENS`` each.

Output length: with ``ignore_eos`` (vLLM extension) the answer is exactly
``max_tokens`` long. Otherwise the length is drawn from a lognormal distribution with
median ``eos_median_tokens`` and shape ``eos_sigma`` (engine config), rounded, at least
``min_tokens`` (and at least 1), capped at ``max_tokens``. The draw is seeded by
``(seed, request_id)``, so a client that sets ``x-request-id`` gets reproducible
lengths whatever the arrival order.

Generated text is made of common English words, one word (with its leading space) per
token, so every content delta is non-empty and re-tokenises to the same count.
"""

from __future__ import annotations

import hashlib
import math
import random
import re
from collections.abc import Iterable, Sequence
from typing import Any

from zerohop.sim.answers.image_parts import image_part_tokens

TOKEN_PATTERN = re.compile(r"\w+|[^\w\s]")
CHAT_MESSAGE_OVERHEAD = 4
CHAT_REQUEST_OVERHEAD = 3
NON_TEXT_PART_TOKENS = 16

# Plain ASCII words: JSON-safe without escaping, so chunks can be formatted as bytes.
WORDS: tuple[str, ...] = (
    "the",
    "of",
    "and",
    "to",
    "in",
    "is",
    "that",
    "for",
    "it",
    "as",
    "was",
    "with",
    "be",
    "by",
    "on",
    "not",
    "he",
    "this",
    "are",
    "or",
    "his",
    "from",
    "at",
    "which",
    "but",
    "have",
    "an",
    "had",
    "they",
    "you",
    "were",
    "their",
    "one",
    "all",
    "we",
    "can",
    "her",
    "has",
    "there",
    "been",
    "if",
    "more",
    "when",
    "will",
    "would",
    "who",
    "so",
    "no",
    "model",
    "token",
    "batch",
    "cache",
    "layer",
    "queue",
    "stream",
    "river",
    "light",
    "stone",
    "paper",
    "signal",
    "engine",
    "garden",
    "window",
    "number",
    "value",
    "system",
    "memory",
    "kernel",
    "vector",
    "matrix",
    "request",
    "server",
    "client",
    "latency",
    "measure",
    "simple",
    "quiet",
    "bright",
    "early",
    "later",
    "over",
    "under",
    "between",
    "through",
    "across",
    "around",
    "before",
    "after",
    "always",
    "never",
)
# Each token's text as emitted: a leading space and the word.
WORD_PIECES: tuple[str, ...] = tuple(" " + w for w in WORDS)
WORD_PIECE_BYTES: tuple[bytes, ...] = tuple(p.encode("ascii") for p in WORD_PIECES)


def count_text_tokens(text: str) -> int:
    """Tokens in a piece of text under the sim's regex rule."""
    return len(TOKEN_PATTERN.findall(text))


def count_prompt_tokens(prompt: Any) -> int:
    """Tokens in a `/v1/completions` prompt: text, list of texts (first is used, as a
    batch would be several requests), token ids, or a list of token-id lists."""
    if isinstance(prompt, str):
        return count_text_tokens(prompt)
    if isinstance(prompt, list):
        if not prompt:
            return 0
        first = prompt[0]
        if isinstance(first, int):
            return len(prompt)
        if isinstance(first, str):
            return count_text_tokens(first)
        if isinstance(first, list):
            return len(first)
    raise ValueError("prompt must be a string, a list of strings or a list of token ids")


def count_content_tokens(content: Any) -> int:
    """Tokens in one message's content: a string or a list of typed parts."""
    if content is None:
        return 0
    if isinstance(content, str):
        return count_text_tokens(content)
    if isinstance(content, list):
        total = 0
        for part in content:
            if isinstance(part, str):
                total += count_text_tokens(part)
            elif isinstance(part, dict):
                text = part.get("text")
                if isinstance(text, str):
                    total += count_text_tokens(text)
                elif part.get("type") == "tool_result":
                    total += count_content_tokens(part.get("content"))
                else:
                    image = image_part_tokens(part)
                    total += NON_TEXT_PART_TOKENS if image is None else image
        return total
    raise ValueError("message content must be a string or a list of parts")


def count_chat_tokens(messages: Iterable[Any], system: Any = None) -> int:
    """Tokens in a chat/messages request including the documented template overhead."""
    total = CHAT_REQUEST_OVERHEAD
    if system is not None:
        total += CHAT_MESSAGE_OVERHEAD + count_content_tokens(system)
    for message in messages:
        if not isinstance(message, dict):
            raise ValueError("each message must be an object")
        total += CHAT_MESSAGE_OVERHEAD + count_content_tokens(message.get("content"))
    return total


def draw_output_tokens(
    *,
    max_tokens: int,
    ignore_eos: bool,
    min_tokens: int,
    seed: int,
    request_id: str,
    eos_median_tokens: float,
    eos_sigma: float,
) -> int:
    """How many tokens the answer will have (see the module docstring)."""
    max_tokens = max(1, max_tokens)
    if ignore_eos:
        return max_tokens
    digest = hashlib.blake2b(f"{seed}:{request_id}".encode(), digest_size=8).digest()
    rng = random.Random(int.from_bytes(digest, "little"))
    drawn = round(math.exp(math.log(max(eos_median_tokens, 1.0)) + eos_sigma * rng.gauss()))
    return max(1, min(max_tokens, max(drawn, min_tokens)))


def word_offset(request_id: str) -> int:
    """Where in WORDS a request's text starts, so answers differ between requests."""
    return sum(request_id.encode()) % len(WORDS)


def generated_text(offset: int, count: int) -> str:
    """The full text of `count` generated tokens starting at `offset` (non-streaming)."""
    n = len(WORD_PIECES)
    return "".join(WORD_PIECES[(offset + i) % n] for i in range(count))


def pieces(offset: int, count: int) -> Sequence[str]:
    n = len(WORD_PIECES)
    return [WORD_PIECES[(offset + i) % n] for i in range(count)]
