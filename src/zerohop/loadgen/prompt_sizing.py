"""How this run sizes text prompts on this target, and what it says when it cannot trust
the target's counts.

The planner turns a token budget into a number of generated words through a
`TokenCalibration`: probe prompts of known size, a count of each, a straight line; and,
where each generated word's count is known and they add up, a word table that sizes
every single prompt exactly (workloads/content/word_counts.py). The counts come, in order:

1. the target's POST /tokenize, asked for the whole request (the messages form for chat
   APIs, so the chat template's tokens count), with the word table read from its token
   strings (tokenize_words.py): `prompt_token_source = tokenize`;
2. `--tokenizer PATH`, a local tokenizer.json: the prompt text as it encodes it, its
   special tokens included but no chat template (local_tokenizer.py):
   `tokenizer`;
3. the `usage.prompt_tokens` of probe requests (a line, no word table): `usage`.

Servers differ: some send no usage, some a constant or zero, some only when the response
is not streamed. Each case gets a one-line warning and the next method (the embedded
target's documented rule, an estimate: `estimate`), never an exception inside Locust's
start-up, and every record's `prompt_token_source` names the method that sized its
prompt.
"""

from __future__ import annotations

import json
import logging
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, cast

import numpy as np

from zerohop.client.protocols import ApiAdapter, GenerationRequest, ProtocolError
from zerohop.core.apis import ApiName
from zerohop.loadgen.tokenize_words import (
    request_body,
    tokenize_count,
    word_counts_from_tokenize,
)
from zerohop.workloads.content.local_tokenizer import LocalTokenizer
from zerohop.workloads.content.prompts import (
    PromptBuilder,
    TokenCalibration,
    default_calibration,
    exactness_problem,
)

__all__ = [
    "MIN_TOKENS_PER_WORD",
    "PROBE_WORDS",
    "SIZED_BY_ESTIMATE",
    "SIZED_BY_TOKENIZE",
    "SIZED_BY_TOKENIZER",
    "SIZED_BY_TOKEN_IDS",
    "SIZED_BY_USAGE",
    "PromptSizing",
    "choose_sizing",
    "judge_usage_probes",
    "probe_tokenize",
    "sizing_from_probes",
    "sizing_from_tokenizer",
]

log = logging.getLogger("zerohop")

SIZED_BY_TOKENIZE = "tokenize"  # the target's own /tokenize counts
SIZED_BY_TOKENIZER = "tokenizer"  # a local tokenizer.json (--tokenizer)
SIZED_BY_USAGE = "usage"  # calibrated on the target's usage.prompt_tokens
SIZED_BY_ESTIMATE = "estimate"  # the embedded target's documented rule: usage unusable
SIZED_BY_TOKEN_IDS = "token_ids"  # exact by construction (completions API)

PROBE_WORDS: tuple[int, int] = (64, 512)
TOKENIZE_PROBE_WORDS: tuple[int, ...] = (16, 24, 32, 48, 64, 96, 128, 256, 512, 1024, 2048,
                                         8192)
"""/tokenize costs the target no generation, so it is asked often: many short probes pin
the intercept, long ones the slope (a line fitted on short probes alone is ~12 tokens
off at 16k words on the embedded target), and none past the model's context: vLLM counts
a longer prompt as `max_model_len`, which bent the line by ~27 tokens on the 4k-context
test model (tests/bench/bench_prompt_sizes_vllm.py)."""
SHORT_PROBE_MAX_WORDS, SHORT_PROBE_TEXTS = 128, 8
"""Short sizes get several different texts each: the probes are the same every run, so
one text per size froze its own spread into the line (-3 tokens on every 64-token
prompt of the tiny model, tests/bench/bench_prompt_sizes_vllm.py)."""
MIN_TOKENS_PER_WORD = 0.5
"""The generated words are 2-3 syllables separated by spaces, and tokenizers split text at
spaces before they merge: at least one token per word. A fitted slope below half a token
per word means the count does not follow the prompt, whatever the server calls it."""


@dataclass(frozen=True)
class PromptSizing:
    """The calibration prompts are built with, and which method gave it."""

    calibration: TokenCalibration
    source: str
    warning: str | None = None


def judge_usage_probes(points: Sequence[tuple[int, int | None]], *,
                       failure: str | None = None
                       ) -> tuple[TokenCalibration | None, str | None]:
    """(words, reported prompt tokens or None) per probe → a calibration, or why the
    counts cannot give one (a phrase that follows "the target's usage.prompt_tokens").
    `failure`: the outcome of a probe that failed, if one did."""
    if failure is not None:
        return None, f"could not be read (a probe request ended {failure})"
    reported = [(words, int(tokens)) for words, tokens in points if tokens is not None]
    if not reported:
        return None, "was absent"
    if all(tokens == 0 for _, tokens in reported):
        return None, "was 0"
    if len({words for words, _ in reported}) < 2:
        return None, "came for only one probe size"
    counts = sorted({tokens for _, tokens in reported})
    if len(counts) == 1:
        sizes = " and ".join(str(words) for words, _ in reported)
        return None, f"was {counts[0]} for prompts of {sizes} words alike"
    units = np.array([w for w, _ in reported], dtype=np.float64)
    tokens = np.array([t for _, t in reported], dtype=np.float64)
    slope, _ = np.polyfit(units, tokens, 1)
    if slope < MIN_TOKENS_PER_WORD:
        return None, f"grew {slope:.3f} tokens per word (< {MIN_TOKENS_PER_WORD}: not a count)"
    return TokenCalibration.fit(reported), None


def sizing_from_probes(points: Sequence[tuple[int, int | None]], api: str, *,
                       failure: str | None = None) -> PromptSizing:
    """The usage calibration when the probes allow it, else the documented estimate with
    a one-line warning (logged here, returned for whoever shows it)."""
    calibration, problem = judge_usage_probes(points, failure=failure)
    if calibration is not None:
        return PromptSizing(calibration, SIZED_BY_USAGE)
    warning = (f"zerohop: warning: prompt sizing: the target's usage.prompt_tokens {problem}; "
               f"prompt sizes are estimates by the embedded target's rule "
               f"(prompt_token_source={SIZED_BY_ESTIMATE})")
    log.warning(warning)
    return PromptSizing(default_calibration(cast(ApiName, api)), SIZED_BY_ESTIMATE, warning)


def probe_tokenize(base_url: str, api: str, model: str, *, api_key: str | None
                   ) -> PromptSizing | None:
    """The calibration from the target's POST /tokenize (vLLM, SGLang, llama.cpp's
    server in its own shapes, the embedded target), asked for the whole request as the
    run will send it (chat messages with their template, or the completions prompt), with
    every word's exact count where the target's token strings give it
    (tokenize_words.py); None when the target has no such endpoint or its answers are
    no count."""
    points = _counted_points(
        lambda text: tokenize_count(base_url, request_body(api, model, text), api_key))
    if not points:
        return None
    calibration, problem = judge_usage_probes(points)
    if calibration is None:
        log.warning("zerohop: warning: prompt sizing: the target's /tokenize count %s; "
                    "not used", problem)
        return None
    words, why_not = word_counts_from_tokenize(base_url, api, model, api_key=api_key,
                                               builder=PromptBuilder())
    if words is None:
        log.info("zerohop: prompt sizing: the target's /tokenize %s; prompt sizes follow "
                 "a line fitted on its counts", why_not)
    return PromptSizing(replace(_fit_relative(points), words=words), SIZED_BY_TOKENIZE)


def choose_sizing(tokenize: Callable[[], PromptSizing | None], tokenizer: LocalTokenizer | None,
                  usage: Callable[[], PromptSizing]) -> PromptSizing:
    """The methods in their order (the module's docstring): the target's /tokenize when
    it has one, else the local tokenizer when `--tokenizer` named one, else the usage of
    probe requests (which falls back to the estimate itself)."""
    tokenized = tokenize()
    if tokenized is not None:
        return tokenized
    if tokenizer is not None:
        return sizing_from_tokenizer(tokenizer)
    return usage()


def sizing_from_tokenizer(tokenizer: LocalTokenizer) -> PromptSizing:
    """The calibration from a local tokenizer.json (`--tokenizer`), exact word by word
    when its counts add up (they do for tokenizers that split at spaces first). It
    counts the prompt text, not a chat template: local_tokenizer.py says why."""
    points = _counted_points(lambda text: (tokenizer.count(text), None))
    builder = PromptBuilder()
    words = tokenizer.word_counts(builder)
    problem = exactness_problem(builder, words, tokenizer.count)
    if problem:
        log.warning("zerohop: warning: prompt sizing: %s %s; prompt sizes follow a line "
                    "fitted on its counts", tokenizer.path, problem)
        return PromptSizing(_fit_relative(points), SIZED_BY_TOKENIZER)
    return PromptSizing(replace(_fit_relative(points), words=words), SIZED_BY_TOKENIZER)


def _counted_points(count: Callable[[str], tuple[int, int | None] | None]
                    ) -> list[tuple[int, int]]:
    """(words, count) for the probe prompts under `count` (count, context length or
    None); none when the first gave no count."""
    builder = PromptBuilder(seed=99)
    rng = np.random.default_rng(99)
    points: list[tuple[int, int]] = []
    sizes = [w for w in TOKENIZE_PROBE_WORDS for _ in range(
        SHORT_PROBE_TEXTS if w <= SHORT_PROBE_MAX_WORDS else 1)]
    for words in sizes:
        answer = count(builder.build_text(words, rng))
        if answer is None:
            break  # e.g. refused as longer than the context: the smaller ones stand
        tokens, max_model_len = answer
        if max_model_len is not None and tokens >= max_model_len:
            break  # cut at the context length: not the prompt's count
        points.append((words, tokens))
    return points


def _fit_relative(points: Sequence[tuple[int, int]]) -> TokenCalibration:
    """The line with each probe weighted by 1/√words: a text's count spreads like the
    square root of its length, so an unweighted fit lets the long probes' spread move
    the intercept, the short prompts' whole error."""
    units = np.array([w for w, _ in points], dtype=np.float64)
    tokens = np.array([t for _, t in points], dtype=np.float64)
    slope, intercept = np.polyfit(units, tokens, 1, w=1.0 / np.sqrt(units))
    return TokenCalibration(a=float(slope), b=float(intercept))


def probe_points(client: Any, adapter: ApiAdapter, model: str, *, api_key: str | None
                 ) -> tuple[list[tuple[int, int | None]], str | None]:
    """Send the probe prompts (streamed, as the run will) and read their prompt counts;
    a probe whose stream had none is asked again without streaming, for servers that
    report usage only then. Returns the points and the outcome of the first probe that
    failed (None: none did); probing stops at a failure."""
    from zerohop.client.llm_client import RequestSpec

    builder = PromptBuilder(seed=99)
    rng = np.random.default_rng(99)
    points: list[tuple[int, int | None]] = []
    for words in PROBE_WORDS:
        generation = GenerationRequest(model=model, max_tokens=1,
                                       prompt=builder.build_text(words, rng))
        record = client.execute(RequestSpec(workload="calibration", generation=generation))
        if record.outcome != "ok":
            return points, record.outcome
        tokens = record.input_tokens
        if tokens is None:
            tokens = _unstreamed_prompt_tokens(client.base_url, adapter, generation, api_key)
        points.append((words, tokens))
    return points, None


def _unstreamed_prompt_tokens(base_url: str, adapter: ApiAdapter, generation: GenerationRequest,
                              api_key: str | None) -> int | None:
    request = adapter.build_request(generation, api_key=api_key, request_id="calibration",
                                    stream=False)
    http = urllib.request.Request(base_url + request.path, data=request.body,
                                  headers=request.headers, method=request.method)
    try:
        with urllib.request.urlopen(http, timeout=60) as response:
            usage = adapter.decode_response(response.read()).usage
    except (urllib.error.URLError, OSError, ProtocolError, json.JSONDecodeError):
        return None
    return usage.input_tokens

