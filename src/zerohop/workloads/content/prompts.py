"""Prompts of an exact size, from text this project generates itself.

The text is pseudo-words built from syllables (a seeded vocabulary, no copied corpus),
with a full stop after every twelfth word, so its token count grows linearly with the
number of words ("units") under any tokenizer: the server's own count is then a straight
line, `tokens = a * units + b`, where `b` is the chat template's overhead. Two probe
requests pin that line down (`TokenCalibration.fit`), after which any target size is one
division away. Random words also keep requests from sharing prefixes by accident.

Where the server's tokenizer is known word by word (`TokenCalibration.words`, a
`word_counts.WordCounts`), `build_for_tokens` picks words whose counts add up to the
target exactly instead. For the token-id path (completions API with a list of ints)
sizes are exact by construction: `token_ids(n, ...)`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from zerohop.core.apis import DEFAULT_API, ApiName, api_spec
from zerohop.workloads.content.word_counts import WordCounts

__all__ = [
    "PROBE_UNITS",
    "WORDS_PER_SENTENCE",
    "PromptBuilder",
    "TokenCalibration",
    "count_regex_tokens",
    "default_calibration",
    "exactness_problem",
    "token_ids",
]

WORDS_PER_SENTENCE = 12
PROBE_UNITS: tuple[int, ...] = (64, 1024, 8192)
"""Prompt sizes (units) worth probing on a server to fit a calibration."""

_ONSETS = (
    "b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z",
    "br", "dr", "gl", "kr", "pl", "st", "tr",
)  # fmt: skip
_VOWELS = ("a", "e", "i", "o", "u", "ai", "ou")
_CODAS = ("", "", "", "n", "r", "s", "l", "m")
_VOCABULARY_SIZE = 4096
_BLOCK_CACHE_SIZE = 8192


class PromptBuilder:
    """Generates prompt text from a seeded pseudo-word vocabulary.

    Per-request randomness comes from the `rng` each call is given; `seed` only fixes the
    words of prefix blocks. The vocabulary depends on `vocabulary_seed` alone, so a
    calibration fitted with one builder holds for any builder with the same vocabulary."""

    def __init__(self, seed: int = 0, *, vocabulary_seed: int = 0) -> None:
        self.seed = seed
        self.vocabulary_seed = vocabulary_seed
        rng = np.random.default_rng([vocabulary_seed, 0x5EED])
        words = _make_vocabulary(rng, _VOCABULARY_SIZE)
        self._words = np.array(words, dtype=object)
        self._words_with_stop = np.array([w + "." for w in words], dtype=object)
        self._block_cache: dict[tuple[int, int], np.ndarray] = {}

    @property
    def vocabulary(self) -> tuple[str, ...]:
        return tuple(self._words.tolist())

    def build_text(self, n_units: int, rng: np.random.Generator) -> str:
        """`n_units` random words, a full stop after every twelfth one."""
        if n_units <= 0:
            return ""
        indices = rng.integers(0, _VOCABULARY_SIZE, size=n_units)
        return " ".join(self._units(indices).tolist())

    def build_for_tokens(
        self, target_tokens: int, rng: np.random.Generator, calibration: TokenCalibration
    ) -> str:
        """Text whose server-side prompt size should be `target_tokens`: exactly, when
        the calibration knows every word's count for this vocabulary."""
        return self.build_counted(target_tokens, rng, calibration)[0]

    def build_counted(
        self, target_tokens: int, rng: np.random.Generator, calibration: TokenCalibration
    ) -> tuple[str, int | None]:
        """`build_for_tokens`, and the prompt's count where the word table gives it
        (None: sized by the line). A count other than the target is a size this
        tokenizer cannot make: below the smallest request, or between two it can."""
        words = calibration.words
        if words is not None and words.vocabulary_seed == self.vocabulary_seed:
            chosen = words.choose(target_tokens, rng)
            return self.text_of(*chosen), words.count(*chosen)
        return self.build_text(calibration.units_for_tokens(target_tokens, rng), rng), None

    def text_of(self, indices: Sequence[int] | np.ndarray, stop_last: bool = False) -> str:
        """The words at these vocabulary indices, a full stop after every twelfth (and
        after the last, if `stop_last`)."""
        text = " ".join(self._units(np.asarray(indices, dtype=np.int64)).tolist())
        return text + "." if stop_last and not text.endswith(".") else text

    def build_from_blocks(self, block_ids: Sequence[int], block_units: int, n_units: int) -> str:
        """Text made of fixed per-id blocks (the same id always gives the same words), cut
        at `n_units`: requests that share leading block ids share a prompt prefix."""
        if n_units <= 0 or block_units <= 0:
            return ""
        parts: list[np.ndarray] = []
        remaining = n_units
        ids = list(block_ids)
        next_fresh = max(ids, default=-1) + 1
        while remaining > 0:
            if ids:
                block_id = int(ids.pop(0))
            else:  # more units than the ids cover: continue with fresh ids
                block_id, next_fresh = next_fresh, next_fresh + 1
            take = min(block_units, remaining)
            parts.append(self._block(block_id, block_units)[:take])
            remaining -= take
        # sentence stops by position in the whole prompt, so the ratio of tokens to
        # units does not depend on the block size
        return " ".join(self._units(np.concatenate(parts)).tolist())

    # --- internals ---------------------------------------------------------------------
    def _units(self, indices: np.ndarray) -> np.ndarray:
        units: np.ndarray = self._words[indices]
        stops = np.arange(WORDS_PER_SENTENCE - 1, indices.size, WORDS_PER_SENTENCE)
        units[stops] = self._words_with_stop[indices[stops]]
        return units

    def _block(self, block_id: int, block_units: int) -> np.ndarray:
        """The vocabulary indices of one block (cached: the same ids recur a lot)."""
        key = (block_id, block_units)
        cached = self._block_cache.get(key)
        if cached is None:
            rng = np.random.default_rng([self.seed, 0xB10C, block_id, block_units])
            cached = rng.integers(0, _VOCABULARY_SIZE, size=block_units)
            if len(self._block_cache) >= _BLOCK_CACHE_SIZE:
                self._block_cache.clear()
            self._block_cache[key] = cached
        return cached


COARSE_TOKENS_PER_UNIT = 1.5


@dataclass(frozen=True)
class TokenCalibration:
    """`tokens = a * units + b` for one builder on one server/API: a is tokens per
    generated word, b the fixed template overhead. `words`, when known: each word's
    exact count on that server/API, which sizes single prompts exactly."""

    a: float
    b: float
    words: WordCounts | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if not self.a > 0:
            raise ValueError(f"calibration slope must be > 0 (got {self.a})")

    @classmethod
    def fit(cls, points: Sequence[tuple[int, int]]) -> TokenCalibration:
        """Least-squares line through (units, measured prompt_tokens) probes; needs at
        least two different unit counts."""
        if len({units for units, _ in points}) < 2:
            raise ValueError("calibration needs probes at >= 2 different sizes")
        units = np.array([p[0] for p in points], dtype=np.float64)
        tokens = np.array([p[1] for p in points], dtype=np.float64)
        slope, intercept = np.polyfit(units, tokens, 1)
        return cls(a=float(slope), b=float(intercept))

    def units_for_tokens(self, target_tokens: int, rng: np.random.Generator | None = None
                         ) -> int:
        """Units to generate for a prompt of `target_tokens` (at least 1). Where a word is
        worth more than `COARSE_TOKENS_PER_UNIT` tokens and `rng` is given, the fraction
        is rounded up with its own probability: plain rounding to whole words put every
        64-token prompt of a small-vocabulary model ~3 tokens short
        (tests/bench/bench_prompt_sizes_vllm.py); this keeps the mean on the target."""
        exact = (target_tokens - self.b) / self.a
        if rng is None or self.a <= COARSE_TOKENS_PER_UNIT:
            return max(1, round(exact))
        whole = math.floor(exact)
        return max(1, whole + int(rng.random() < exact - whole))

    def smallest_prompt_tokens(self) -> int:
        """The fewest tokens a text prompt can count on this target: one word and the
        request's framing (a chat template, a BOS). A smaller size cannot be built; the
        planner sends this one instead and marks the record `prompt_clamped`."""
        if self.words is not None:
            return self.words.smallest
        return max(1, math.ceil(self.a + self.b))

    def block_units(self, block_tokens: int) -> int:
        """Units that make `block_tokens` tokens inside a prompt (no template overhead)."""
        return max(1, round(block_tokens / self.a))


# The embedded target (zerohop.sim) documents its rule: one token per match of this
# pattern, plus a chat template overhead of 4 per message and 3 per request.
_SIM_TOKEN_PATTERN = re.compile(r"\w+|[^\w\s]")
_SIM_CHAT_OVERHEAD_TOKENS = 4 + 3



def count_regex_tokens(text: str) -> int:
    """Tokens of `text` under the embedded target's documented rule (\\w+|[^\\w\\s])."""
    return sum(1 for _ in _SIM_TOKEN_PATTERN.finditer(text))


def default_calibration(api: ApiName = DEFAULT_API, builder: PromptBuilder | None = None) -> (
    TokenCalibration
):
    """The calibration for the embedded target, measured by counting the builder's own
    text under the target's documented rule (not assumed from the word count), plus the
    documented one-message chat overhead for chat and Anthropic requests."""
    builder = builder or PromptBuilder()
    rng = np.random.default_rng([builder.seed, 0xCA1B])
    overhead = _SIM_CHAT_OVERHEAD_TOKENS if api_spec(api).chat_messages else 0
    probes = [(n, count_regex_tokens(builder.build_text(n, rng)) + overhead) for n in PROBE_UNITS]
    return TokenCalibration.fit(probes)


EXACT_CHECK_EXTRA_TOKENS: tuple[int, ...] = (2, 9, 31, 100, 333, 1000, 3000)
"""The sizes a word table is checked on before it sizes prompts: these many tokens past
the longest first word, short ones (the finishing words alone) to long ones."""


def exactness_problem(builder: PromptBuilder, words: WordCounts,
                      count: Callable[[str], int | None], *, limit: int | None = None,
                      seed: int = 7) -> str | None:
    """Why `words` does not size this builder's prompts exactly under `count` (the
    tokenizer's count of the whole request with this prompt text, None when it gave
    none), or None when prompts of every check size count what they were built for.
    `limit`: no check prompt of `limit` tokens or more (a context length)."""
    rng = np.random.default_rng(seed)
    base = max(words.opening.values())
    targets = [base + extra for extra in EXACT_CHECK_EXTRA_TOKENS
               if limit is None or base + extra < limit]
    for target in targets:
        counted = count(builder.text_of(*words.choose(target, rng)))
        if counted is None:
            return f"gave no count for a check prompt of {target} tokens"
        if counted != target:
            return f"counted {counted} tokens for a prompt built word by word for {target}"
    return None


def token_ids(
    n: int, rng: np.random.Generator, vocab_size: int, *, low: int = 1000
) -> list[int]:
    """`n` random token ids in [low, vocab_size): far from the special tokens most
    vocabularies keep at the very start and end, so the prompt is exactly n tokens."""
    high = vocab_size - 256 if vocab_size - 256 > low else vocab_size
    if high <= low:
        raise ValueError(f"vocab_size {vocab_size} leaves no ids above {low}")
    return rng.integers(low, high, size=max(0, n)).tolist()


# --- vocabulary ---------------------------------------------------------------------------
def _make_vocabulary(rng: np.random.Generator, size: int) -> list[str]:
    """`size` distinct lower-case pseudo-words of 2-3 syllables."""
    syllables = [o + v + c for o in _ONSETS for v in _VOWELS for c in _CODAS]
    words: list[str] = []
    seen: set[str] = set()
    while len(words) < size:
        batch = 2 * size
        lengths = rng.integers(2, 4, size=batch)
        picks = rng.integers(0, len(syllables), size=(batch, 3))
        for length, row in zip(lengths.tolist(), picks.tolist(), strict=True):
            word = "".join(syllables[i] for i in row[:length])
            if word not in seen:
                seen.add(word)
                words.append(word)
                if len(words) == size:
                    break
    return words
