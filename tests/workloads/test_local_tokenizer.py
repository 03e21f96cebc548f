"""`--tokenizer PATH`: a local tokenizer.json read with the `tokenizers` package
(workloads/content/local_tokenizer.py), trained in the test: no download."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.workloads.tiny_tokenizer import write_tiny_tokenizer
from zerohop.workloads.content.local_tokenizer import TokenizerPathError, load_local_tokenizer
from zerohop.workloads.content.prompts import PromptBuilder, exactness_problem

pytestmark = pytest.mark.unit


def test_a_folder_or_its_file_reads_the_same_tokenizer(tmp_path: Path) -> None:
    path = write_tiny_tokenizer(tmp_path / "model")
    by_folder, by_file = load_local_tokenizer(tmp_path / "model"), load_local_tokenizer(path)
    assert by_folder.path == by_file.path == path
    text = PromptBuilder().build_text(50, np.random.default_rng(0))
    assert by_folder.count(text) == by_file.count(text) > 50
    assert by_folder.count("") == 1  # the BOS its post-processor adds


def test_the_word_table_adds_up_to_the_tokenizers_count(tmp_path: Path) -> None:
    tokenizer = load_local_tokenizer(write_tiny_tokenizer(tmp_path))
    builder = PromptBuilder()
    words = tokenizer.word_counts(builder)
    assert len(words.opening) == len(builder.vocabulary)  # any word may open a prompt
    assert words.tokens_per_word > 3  # a few hundred tokens: words fall into pieces
    assert exactness_problem(builder, words, tokenizer.count) is None
    rng = np.random.default_rng(5)
    for target in rng.integers(12, 3000, size=100).tolist():
        chosen = words.choose(target, rng)
        assert tokenizer.count(builder.text_of(*chosen)) == words.count(*chosen) == target


def test_a_tokenizer_that_merges_across_words_is_caught(tmp_path: Path) -> None:
    tokenizer = load_local_tokenizer(write_tiny_tokenizer(tmp_path, split_at_spaces=False))
    builder = PromptBuilder()
    problem = exactness_problem(builder, tokenizer.word_counts(builder), tokenizer.count)
    assert problem is not None and "built word by word for" in problem


@pytest.mark.parametrize("make, words", [
    (lambda root: root / "absent.json", ["absent.json", "does not exist"]),
    (lambda root: root, ["without tokenizer.json"]),
    (lambda root: _write(root / "bad.json", "{not json"), ["bad.json", "is not a tokenizer"]),
    (lambda root: _write(root / "tokenizer.json", '{"model": 3}'), ["is not a tokenizer"]),
])
def test_a_bad_path_says_what_is_wrong_in_one_line(tmp_path: Path, make, words) -> None:
    with pytest.raises(TokenizerPathError) as caught:
        load_local_tokenizer(make(tmp_path))
    message = str(caught.value)
    assert message.startswith("--tokenizer") and "\n" not in message
    for word in words:
        assert word in message


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path
