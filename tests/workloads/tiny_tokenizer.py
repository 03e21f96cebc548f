"""A tiny byte-level BPE tokenizer trained in the test on the builder's own words (no
download): a few hundred tokens, a BOS its post-processor adds, saved as tokenizer.json."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from zerohop.workloads.content.prompts import PromptBuilder


def write_tiny_tokenizer(folder: Path, *, vocab_size: int = 300,
                         split_at_spaces: bool = True) -> Path:
    """`folder/tokenizer.json`, trained on generated words. `split_at_spaces=False`:
    no GPT-2 split before merging, so merges span words (not additive)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    rng = np.random.default_rng(1)
    builder = PromptBuilder()
    corpus = [builder.build_text(40, rng) for _ in range(300)]
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False,
                                                       use_regex=split_at_spaces)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.train_from_iterator(corpus, trainer=trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=["<s>"], show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tokenizer.post_processor = processors.TemplateProcessing(
        single="<s> $A", special_tokens=[("<s>", tokenizer.token_to_id("<s>"))])
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "tokenizer.json"
    tokenizer.save(str(path))
    return path
