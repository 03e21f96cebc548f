"""`--tokenizer PATH`: the target's tokenizer from a local `tokenizer.json`, for a target
that has no POST /tokenize.

PATH is a `tokenizer.json` or a model folder holding one; it is read with the
`tokenizers` package (nothing is downloaded). A `tokenizer.json` holds the vocabulary,
how text is split and the special tokens its post-processor adds (a BOS), but no chat
template: that lives beside it (`tokenizer_config.json`, `chat_template.jinja`) and the
server renders it. Prompts sized with a local tokenizer therefore count the prompt text
as the tokenizer encodes it, its special tokens included; a chat request carries the
template's framing on top (a few tokens per message), which the asked size does not
include and the report's asked-vs-achieved figures show. A server's own /tokenize, when
it has one, counts the whole request and is used first.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from zerohop.core.exit_codes import one_line
from zerohop.workloads.content.prompts import WORDS_PER_SENTENCE, PromptBuilder
from zerohop.workloads.content.word_counts import WordCounts

__all__ = [
    "TOKENIZER_FILE", "TOKENIZER_HELP", "LocalTokenizer", "TokenizerPathError",
    "load_local_tokenizer",
]

TOKENIZER_FILE = "tokenizer.json"
TOKENIZER_HELP = (
    "The target's tokenizer: a tokenizer.json, or a model folder holding one. Sizes "
    "prompts exactly, word by word, when the target has no /tokenize (which is used "
    "first and also counts the chat template; a tokenizer.json counts the prompt text "
    "without it), instead of calibrating on the usage of probe requests.")


class TokenizerPathError(ValueError):
    """--tokenizer names no readable tokenizer.json (one line: which path and why)."""


@dataclass(frozen=True)
class LocalTokenizer:
    """A `tokenizers.Tokenizer` read from `path`."""

    path: Path
    tokenizer: Any

    def count(self, text: str) -> int:
        """Tokens of `text` as a prompt: special tokens (a BOS) included."""
        return len(self.tokenizer.encode(text, add_special_tokens=True).ids)

    def counts(self, texts: list[str], *, specials: bool) -> np.ndarray:
        encoded = self.tokenizer.encode_batch(texts, add_special_tokens=specials)
        return np.array([len(e.ids) for e in encoded], dtype=np.int64)

    def word_counts(self, builder: PromptBuilder) -> WordCounts:
        """Every vocabulary word's count after a space and with a stop, and as a
        prompt's first word with the tokenizer's special tokens (every word can open)."""
        words = list(builder.vocabulary)
        opening = self.counts(words, specials=True)
        return WordCounts(
            spaced=self.counts([" " + w for w in words], specials=False),
            spaced_stop=self.counts([" " + w + "." for w in words], specials=False),
            opening={i: int(c) for i, c in enumerate(opening.tolist())},
            stop_every=WORDS_PER_SENTENCE,
            vocabulary_seed=builder.vocabulary_seed,
        )


def load_local_tokenizer(path: str | Path) -> LocalTokenizer:
    """The tokenizer at `path` (a tokenizer.json, or a folder holding one); a
    `TokenizerPathError` says in one line what is wrong with the path."""
    given = Path(path).expanduser()
    file = given / TOKENIZER_FILE if given.is_dir() else given
    if given.is_dir() and not file.is_file():
        raise TokenizerPathError(f"--tokenizer: {given} is a folder without {TOKENIZER_FILE}")
    if not file.is_file():
        raise TokenizerPathError(f"--tokenizer: {given} does not exist")
    try:
        from tokenizers import Tokenizer
    except ImportError:  # a dependency, but an install may lack it
        raise TokenizerPathError("--tokenizer needs the `tokenizers` package "
                                 "(pip install tokenizers)") from None
    try:
        tokenizer = Tokenizer.from_file(str(file))
    except Exception as exc:  # the Rust side raises its own Exception types
        raise TokenizerPathError(
            f"--tokenizer: {file} is not a tokenizer.json the tokenizers package reads "
            f"({one_line(exc)[:200]})") from None
    return LocalTokenizer(path=file, tokenizer=tokenizer)
