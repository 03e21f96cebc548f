"""The target's POST /tokenize, and every generated word's token count read from it, for
exact prompt sizes (workloads/content/word_counts.py).

vLLM and the embedded target answer `{"model", "prompt"}` or `{"model", "messages",
"add_generation_prompt": true}` with `{"count", "tokens", "max_model_len"}`, and with
`"return_token_strs": true` also the tokens as strings; llama.cpp's server is asked the
same in its own shapes (llamacpp_tokenize.py). The builder's whole vocabulary is
sent in a few long prompts, every word after a space (then again, each followed by a
full stop); a word starts at each token whose string starts with the tokenizer's space
mark (`Ġ` in byte-level BPE, `▁` in SentencePiece, a plain space), so each word's count
is the length of its run of tokens. A prompt's first word has no space before it and
sits right after the chat template's opening: it is counted with the request's whole
framing, in the request's own form (messages for chat APIs), for a few words that then
open every prompt. The table is used only once prompts built with it count exactly what
they were built for (`prompts.exactness_problem`); a server without token strings, or
a tokenizer that merges across words, leaves the fitted line.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Sequence
from typing import Any

import numpy as np

from zerohop.core.apis import api_spec
from zerohop.loadgen.llamacpp_tokenize import (
    TOKENIZE_PATH,
    is_llamacpp_answer,
    llamacpp_request,
    vllm_shaped_answer,
)
from zerohop.workloads.content.prompts import WORDS_PER_SENTENCE, PromptBuilder, exactness_problem
from zerohop.workloads.content.word_counts import WordCounts

__all__ = [
    "OPENING_WORDS", "request_body", "tokenize", "tokenize_count", "word_counts_from_tokenize",
    "word_runs",
]

SPACE_MARKS = (" ", "Ġ", "▁")
OPENING_WORDS = 16
"""How many words may open a prompt (each costs one /tokenize request to measure with
the request's framing): all prompts start with one of them and share nothing more."""
_FIRST_CHUNK_WORDS, _MIN_CHUNK_WORDS, _MAX_CHUNK_WORDS = 64, 16, 1024
_CHUNK_CONTEXT_SHARE = 0.5  # a chunk of words stays within half the context length
_OPENING_SEED = 0x0FE7


def tokenize(base_url: str, body: dict[str, Any], api_key: str | None
             ) -> dict[str, Any] | None:
    """The answer of POST /tokenize in vLLM's shape; None when there is no such endpoint
    or it gave no count (refused, absent, not JSON). llama.cpp's server, which answers
    the vLLM-shaped body with token ids and no count, is asked again in its own shapes
    (llamacpp_tokenize.py)."""
    answer = _post_json(base_url, TOKENIZE_PATH, body, api_key)
    if is_llamacpp_answer(answer):
        path, llamacpp_body = llamacpp_request(body)
        answer = vllm_shaped_answer(path, _post_json(base_url, path, llamacpp_body, api_key))
    count = answer.get("count") if isinstance(answer, dict) else None
    if isinstance(count, bool) or not isinstance(count, int):
        return None
    return answer


def _post_json(base_url: str, path: str, body: dict[str, Any], api_key: str | None) -> Any:
    """The JSON answer of POST base_url+path; None when it failed or was not JSON."""
    headers = {"content-type": "application/json"}
    if api_key:
        headers["authorization"] = f"Bearer {api_key}"
    request = urllib.request.Request(base_url.rstrip("/") + path,
                                     data=json.dumps(body).encode(), headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.loads(response.read())
    except (urllib.error.URLError, OSError, ValueError):
        return None


def tokenize_count(base_url: str, body: dict[str, Any], api_key: str | None
                   ) -> tuple[int, int | None] | None:
    """(count, max_model_len or None) from POST /tokenize; None when it gave no count."""
    answer = tokenize(base_url, body, api_key)
    if answer is None:
        return None
    limit = answer.get("max_model_len")
    return answer["count"], limit if isinstance(limit, int) and not isinstance(limit, bool) \
        else None


def request_body(api: str, model: str, text: str) -> dict[str, Any]:
    """The /tokenize body that counts a request of `api` with this prompt as the server
    will: the messages form for chat APIs (the template's tokens count), else the
    prompt with the special tokens a completion gets."""
    if api_spec(api).chat_messages:
        return {"model": model, "messages": [{"role": "user", "content": text}],
                "add_generation_prompt": True}
    return {"model": model, "prompt": text}


def word_runs(token_strs: Sequence[str]) -> list[int]:
    """The lengths of the runs of tokens that each start with the space mark (the mark
    of the first token that has one); tokens before it are left out."""
    runs: list[int] = []
    mark = next((s[0] for s in token_strs if s[:1] in SPACE_MARKS), None)
    for token in token_strs:
        if mark is not None and token.startswith(mark):
            runs.append(1)
        elif runs:
            runs[-1] += 1
    return runs


def word_counts_from_tokenize(base_url: str, api: str, model: str, *, api_key: str | None,
                              builder: PromptBuilder) -> tuple[WordCounts | None, str]:
    """The builder's word table on this target and API, or None and why not (a phrase
    that follows "the target's /tokenize")."""
    vocabulary = builder.vocabulary
    tables: list[np.ndarray] = []
    limit: int | None = None
    for stop in ("", "."):
        counts, limit, problem = _spaced_counts(base_url, model, api_key, vocabulary, stop)
        if counts is None:
            return None, problem
        tables.append(counts)
    opening: dict[int, int] = {}
    chosen = np.random.default_rng(_OPENING_SEED).choice(len(vocabulary), OPENING_WORDS,
                                                         replace=False)
    for index in sorted(chosen.tolist()):
        answer = tokenize_count(base_url, request_body(api, model, vocabulary[index]), api_key)
        if answer is None:
            return None, "gave no count for a one-word prompt"
        opening[index] = answer[0]
    words = WordCounts(spaced=tables[0], spaced_stop=tables[1], opening=opening,
                       stop_every=WORDS_PER_SENTENCE, vocabulary_seed=builder.vocabulary_seed)

    def count(text: str) -> int | None:
        answer = tokenize_count(base_url, request_body(api, model, text), api_key)
        return None if answer is None else answer[0]

    problem = exactness_problem(builder, words, count, limit=limit) or ""
    return (None, problem) if problem else (words, "")


def _spaced_counts(base_url: str, model: str, api_key: str | None,
                   vocabulary: Sequence[str], stop: str
                   ) -> tuple[np.ndarray | None, int | None, str]:
    """Every word's count after a space (and followed by `stop`), from the token strings
    of prompts of many words; (counts, max_model_len, "") or (None, None, why not)."""
    counts = np.zeros(len(vocabulary), dtype=np.int64)
    start, size, limit = 0, _FIRST_CHUNK_WORDS, None
    while start < len(vocabulary):
        chunk = range(start, min(start + size, len(vocabulary)))
        # a word before the chunk takes whatever a tokenizer does at a prompt's start
        text = " " + vocabulary[chunk[0]] + "".join(" " + vocabulary[i] + stop for i in chunk)
        answer = tokenize(base_url, {"model": model, "prompt": text, "add_special_tokens": False,
                                     "return_token_strs": True}, api_key)
        strings = None if answer is None else answer.get("token_strs")
        if answer is None or not isinstance(strings, list) or not all(
                isinstance(s, str) for s in strings):
            return None, None, "gave no token strings (return_token_strs)"
        runs = word_runs(strings)
        if len(runs) < len(chunk) + 1:
            return None, None, (f"token strings split {len(chunk)} words into {len(runs)} "
                                "runs: no space mark to split them at")
        counts[chunk.start:chunk.stop] = runs[-len(chunk):]
        given = answer.get("max_model_len")
        limit = given if isinstance(given, int) and given > 0 else None
        if limit is not None:
            per_word = max(1.0, answer["count"] / (len(chunk) + 1))
            size = int(np.clip(_CHUNK_CONTEXT_SHARE * limit / per_word, _MIN_CHUNK_WORDS,
                               _MAX_CHUNK_WORDS))
        else:
            size = _MAX_CHUNK_WORDS // 2
        start = chunk.stop
    return counts, limit, ""
