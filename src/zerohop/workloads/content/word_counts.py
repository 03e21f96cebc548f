"""Exact prompt sizes: the token count of every generated word, summed.

The tokenizers servers use split text at spaces and punctuation before they merge
(byte-level BPE with GPT-2's or Llama 3's split, SentencePiece splitting at spaces): a
text of the builder's words then counts as the sum of its words' counts. A `WordCounts`
holds, for the builder's vocabulary, the tokens of each word after a space, and of it
followed by the full stop that ends a sentence; and, for some words, the tokens of the
whole request whose prompt is that one word: the request's framing (a chat template, a
BOS) and the first word, which has no space before it, counted together in place.

`choose(target, rng)` draws random words whose counts add up to exactly `target`: the
bulk at random, the last few words picked for their counts; the last word may end its
sentence early (a full stop), which reaches the sizes whole sentences skip (every word
one token, as on the embedded target). Whoever builds a `WordCounts` checks it against
the tokenizer on whole prompts first (a tokenizer that merges across words is not
additive): `prompt_sizing` and `local_tokenizer` do.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

__all__ = ["WordCounts", "Words"]

_MAX_FINISH_WORDS = 4
"""The last words are chosen for their counts; four words of any sizes reach every
remainder the tokenizer's word sizes can reach, in practice."""
_MAX_TRIES = 8  # first words tried, and drawn words given back, before settling
_PLAN_CACHE_SIZE = 65_536


class Words(NamedTuple):
    """A prompt as vocabulary indices; `stop_last`: its last word ends a sentence."""

    indices: np.ndarray
    stop_last: bool = False


@dataclass(frozen=True, eq=False)
class WordCounts:
    """Token counts of the builder's words (indices into its vocabulary).

    `spaced[i]`: tokens of " word"; `spaced_stop[i]`: of " word."; `opening[i]`: tokens
    of the whole request whose prompt text is word i alone (framing included). A prompt
    is `opening[first] + Σ spaced/spaced_stop of the rest`, a full stop after every
    `stop_every`-th word (never after the first) and, if `stop_last`, after the last."""

    spaced: np.ndarray
    spaced_stop: np.ndarray
    opening: Mapping[int, int]
    stop_every: int
    vocabulary_seed: int = 0  # the builder vocabulary the indices point into
    tokens_per_word: float = field(init=False)  # the mean, the sentences' stops included
    _opening_ids: np.ndarray = field(init=False, repr=False)
    _opening_counts: np.ndarray = field(init=False, repr=False)  # in _opening_ids' order
    _by_count: tuple[dict[int, np.ndarray], dict[int, np.ndarray]] = field(init=False,
                                                                            repr=False)
    _longest: int = field(init=False, repr=False)
    _plan_cache: dict[tuple[int, int], list[tuple[tuple[int, ...], bool]]] = field(
        init=False, repr=False)

    def __post_init__(self) -> None:
        spaced = np.asarray(self.spaced, dtype=np.int64)
        spaced_stop = np.asarray(self.spaced_stop, dtype=np.int64)
        if spaced.shape != spaced_stop.shape or spaced.ndim != 1 or not spaced.size:
            raise ValueError("spaced and spaced_stop: one count per vocabulary word")
        if not self.opening or min(self.opening) < 0 or max(self.opening) >= spaced.size:
            raise ValueError("opening: counts for some vocabulary words")
        if min(spaced.min(), spaced_stop.min()) < 1 or self.stop_every < 2:
            raise ValueError("every word counts at least one token")
        stops = 1.0 / self.stop_every
        for name, value in (
            ("spaced", spaced), ("spaced_stop", spaced_stop),
            ("tokens_per_word", float(spaced.mean() * (1 - stops) + spaced_stop.mean() * stops)),
            ("_opening_ids", np.array(sorted(self.opening), dtype=np.int64)),
            ("_opening_counts", np.array([self.opening[i] for i in sorted(self.opening)],
                                         dtype=np.int64)),
            ("_by_count", (_group(spaced), _group(spaced_stop))),
            ("_longest", int(max(spaced.max(), spaced_stop.max()))),
            ("_plan_cache", {}),
        ):
            object.__setattr__(self, name, value)

    @property
    def smallest(self) -> int:
        """The tokens of the smallest request these words make: one word and the framing."""
        return min(self.opening.values())

    def count(self, indices: Sequence[int] | np.ndarray, stop_last: bool = False) -> int:
        """The request's tokens when its prompt is these words (the first an opening)."""
        ids = np.asarray(indices, dtype=np.int64)
        if not ids.size:
            raise ValueError("a prompt has at least one word")
        total = self.opening[int(ids[0])] + int(self._counts_at(ids[1:], 1).sum())
        last = ids.size - 1
        if stop_last and last and not self._is_stop(last):
            total += int(self.spaced_stop[ids[-1]] - self.spaced[ids[-1]])
        return total

    def choose(self, target: int, rng: np.random.Generator) -> Words:
        """Words whose prompt counts exactly `target` tokens. When none can: for a
        target below the shortest request, the shortest request; else the closest prompt
        found, short of the target by less than a word (never over it). Only openings
        that fit are tried: with openings of several sizes (a small vocabulary splits
        first words into more pieces), one drawn among them all could overshoot."""
        ids = self._opening_ids[self._opening_counts <= target]
        if not ids.size:
            return Words(self._opening_ids[[int(np.argmin(self._opening_counts))]])
        start = int(rng.integers(0, ids.size))
        best = Words(ids[[start]])
        for k in range(min(ids.size, _MAX_TRIES)):  # another first word if one fails
            first = int(ids[(start + k) % ids.size])
            words, exact = self._choose_after(first, target - self.opening[first], rng)
            if exact and words is not None:
                return words
            if words is not None and self.count(*words) > self.count(*best):
                best = words
        return best

    # --- internals ---------------------------------------------------------------------
    def _counts_at(self, ids: np.ndarray, start: int) -> np.ndarray:
        """The counts of `ids` placed from word position `start` on."""
        positions = np.arange(start, start + ids.size)
        stops = positions % self.stop_every == self.stop_every - 1
        counts: np.ndarray = np.where(stops, self.spaced_stop[ids], self.spaced[ids])
        return counts

    def _is_stop(self, position: int) -> bool:
        return position % self.stop_every == self.stop_every - 1

    def _choose_after(self, first: int, remaining: int, rng: np.random.Generator
                      ) -> tuple[Words | None, bool]:
        """(the first word and words after it adding `remaining` tokens, True), or the
        closest short of it and False (None: not even the first word fits)."""
        if remaining < 0:
            return None, False
        words = [first]
        mean = self.tokens_per_word
        while remaining > self._longest:  # the bulk, leaving a word's worth to finish
            # a quarter more words than the mean needs, so one draw nearly always covers
            # the bulk (a second round of these array calls costs more than the spares)
            draw = rng.integers(0, self.spaced.size,
                                size=int((remaining - self._longest) / mean * 1.25) + 4)
            cumulative = np.cumsum(self._counts_at(draw, len(words)))
            keep = int(np.searchsorted(cumulative, remaining - self._longest, side="right"))
            if keep == 0:
                break
            words.extend(draw[:keep].tolist())
            remaining -= int(cumulative[keep - 1])
        bulk, bulk_remaining = list(words), remaining
        for _ in range(_MAX_TRIES):
            tail = self._finish(remaining, len(words), rng)
            if tail is not None:
                return Words(np.array(words + tail.indices.tolist(), dtype=np.int64),
                             tail.stop_last), True
            if len(words) == 1:
                break
            position = len(words) - 1  # give back the last drawn word and try again
            remaining += int(self._counts_at(np.array([words.pop()]), position)[0])
        return self._fill(bulk, bulk_remaining, rng), False

    def _fill(self, words: list[int], remaining: int, rng: np.random.Generator) -> Words:
        """`words` and, while one fits, the longest word that fits: the closest prompt
        short of the target, by less than a word."""
        while True:
            group = self._by_count[self._is_stop(len(words))]
            fits = [c for c in group if c <= remaining]
            if not fits:
                return Words(np.array(words, dtype=np.int64))
            words.append(self._word_of(max(fits), self._is_stop(len(words)), rng))
            remaining -= max(fits)

    def _finish(self, remaining: int, position: int, rng: np.random.Generator
                ) -> Words | None:
        """At most `_MAX_FINISH_WORDS` words from `position` on adding exactly
        `remaining` tokens (random among the fewest words that do), or None."""
        if remaining == 0:
            return Words(np.zeros(0, dtype=np.int64))
        plans = self._plans(remaining, position % self.stop_every)
        if not plans:
            return None
        counts, stop_last = plans[int(rng.integers(0, len(plans)))]
        last = len(counts) - 1
        return Words(np.array([
            self._word_of(count, self._is_stop(position + k) or (k == last and stop_last), rng)
            for k, count in enumerate(counts)], dtype=np.int64), stop_last)

    def _plans(self, remaining: int, phase: int) -> list[tuple[tuple[int, ...], bool]]:
        """Every way (word counts, whether the last word ends its sentence early) that
        the fewest words from sentence position `phase` add `remaining` tokens. Cached:
        the same few remainders recur in every prompt, and searching them afresh cost
        more than the rest of a request (tests/bench/bench_open_loop_sender.py)."""
        key = (remaining, phase)
        plans = self._plan_cache.get(key)
        if plans is None:
            plans = []
            for length in range(1, _MAX_FINISH_WORDS + 1):
                plans = list(self._sequences(remaining, phase, length))
                if plans:
                    break
            if len(self._plan_cache) >= _PLAN_CACHE_SIZE:
                self._plan_cache.clear()
            self._plan_cache[key] = plans
        return plans

    def _sequences(self, remaining: int, position: int, length: int
                   ) -> Iterator[tuple[tuple[int, ...], bool]]:
        if length == 1:
            ends = (True,) if self._is_stop(position) else (False, True)
            for stop in ends:
                if remaining in self._by_count[stop]:
                    yield (remaining,), stop
            return
        for count in self._by_count[self._is_stop(position)]:
            if count < remaining:
                for rest, stop_last in self._sequences(remaining - count, position + 1,
                                                       length - 1):
                    yield (count, *rest), stop_last

    def _word_of(self, count: int, stop: bool, rng: np.random.Generator) -> int:
        group = self._by_count[stop][count]
        return int(group[rng.integers(0, group.size)])


def _group(counts: np.ndarray) -> dict[int, np.ndarray]:
    """count → the vocabulary indices with that count."""
    return {int(c): np.flatnonzero(counts == c) for c in np.unique(counts)}
