"""Prompt sizing on servers that count differently (loadgen/prompt_sizing.py): the judgement
of probe counts (pure) and the /tokenize probes against a small local server."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from tests.targets.quirky_server import MODEL, quirky_server
from zerohop.loadgen.prompt_sizing import (
    SIZED_BY_ESTIMATE,
    SIZED_BY_TOKENIZE,
    SIZED_BY_USAGE,
    judge_usage_probes,
    probe_tokenize,
    sizing_from_probes,
)
from zerohop.workloads.content.prompts import TokenCalibration, default_calibration


@pytest.mark.unit
@pytest.mark.parametrize("points, failure, reason", [
    ([(64, None), (512, None)], None, "was absent"),
    ([(64, 0), (512, 0)], None, "was 0"),
    ([(64, 17), (512, 17)], None, "was 17 for prompts of 64 and 512 words alike"),
    ([(64, 90), (512, None)], None, "came for only one probe size"),
    ([(64, 300), (512, 120)], None, "tokens per word"),  # shrinks with the prompt
    ([(64, 100), (512, 101)], None, "tokens per word"),  # grows, but is no count
    ([(64, 90)], "http_500", "a probe request ended http_500"),
])
def test_counts_that_cannot_size_prompts_say_why(points: list[tuple[int, int | None]],
                                                 failure: str | None, reason: str) -> None:
    calibration, problem = judge_usage_probes(points, failure=failure)
    assert calibration is None and problem is not None and reason in problem


@pytest.mark.unit
def test_counts_that_follow_the_prompt_calibrate() -> None:
    calibration, problem = judge_usage_probes([(64, 12 + 64 * 3 // 2), (512, 12 + 768)])
    assert problem is None and calibration is not None
    assert calibration.a == pytest.approx(1.5) and calibration.b == pytest.approx(12, abs=0.5)


@pytest.mark.unit
def test_unusable_counts_fall_back_to_the_estimate_with_one_warning(
        caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="zerohop"):
        sizing = sizing_from_probes([(64, 17), (512, 17)], "openai-completions")
    assert sizing.source == SIZED_BY_ESTIMATE
    assert sizing.calibration == default_calibration("openai-completions")
    assert sizing.warning is not None and "\n" not in sizing.warning
    assert sizing.warning.startswith("zerohop: warning: prompt sizing:")
    assert [r.getMessage() for r in caplog.records] == [sizing.warning]
    good = sizing_from_probes([(64, 100), (512, 772)], "openai-chat")
    assert good.source == SIZED_BY_USAGE and good.warning is None


@pytest.mark.integration
def test_tokenize_probes_stop_at_the_context_length() -> None:
    # 8,192 words are ~8,900 tokens: over a 2,048 context, counted as 2,048 by the server
    with quirky_server("normal", tokenize_max_len=2048) as url:
        sizing = probe_tokenize(url, "openai-completions", MODEL, api_key=None)
    assert sizing is not None and sizing.source == SIZED_BY_TOKENIZE
    assert sizing.calibration.a == pytest.approx(13 / 12, rel=0.01)  # a word + a stop per 12
    assert abs(sizing.calibration.b) < 1.0


@pytest.mark.integration
def test_no_tokenize_endpoint_means_the_next_method() -> None:
    with quirky_server("normal") as url:
        assert probe_tokenize(url, "openai-chat", MODEL, api_key=None) is None


@pytest.mark.unit
def test_coarse_words_round_up_by_their_fraction_so_the_mean_is_on_target() -> None:
    coarse = TokenCalibration(a=4.0, b=2.0)  # 67 tokens = 16 words and a quarter
    rng = np.random.default_rng(5)
    units = [coarse.units_for_tokens(67, rng) for _ in range(4000)]
    assert set(units) == {16, 17}
    assert np.mean(units) * 4.0 + 2.0 == pytest.approx(67, abs=0.1)
    assert coarse.units_for_tokens(67) == 16  # without a generator: plain rounding
    fine = TokenCalibration(a=1.08, b=7.0)  # the embedded target's words: plain rounding
    assert {fine.units_for_tokens(64, rng) for _ in range(50)} == {fine.units_for_tokens(64)}
