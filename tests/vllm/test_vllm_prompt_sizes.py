"""README: prompts are sized by the target's own `/tokenize`, word by word, so each
prompt is the asked size exactly on vLLM. Checked here on the tier's vLLM CPU server,
chat and completions, for every ok request: sized by `tokenize`, and `input_tokens`
(vLLM's `usage.prompt_tokens`) equal to `target_input_tokens`, except a size the
tokenizer cannot make: below the smallest request (the chat template or BOS and one
word) it comes out as that smallest request, between two sizes it can make (one token
past the smallest completion, on the tier's tokenizer) as the nearest short of it;
either way marked `prompt_clamped` and said once on the console. Then again on a second
vLLM whose tokenizer is trained here with another vocabulary size, so the words split
into other pieces: a sizing rule that fits one tokenizer by luck fails there."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.exact_prompt_sizes import APIS, run_and_check
from tests.vllm_cpu import VllmServer, build_tiny_model, probe_env, start_vllm

SECOND_VOCABULARY = 320  # the tier's own model has 512 tokens


@pytest.mark.parametrize("api", APIS)
def test_every_prompt_is_the_asked_size_on_vllm(vllm_server: VllmServer, tmp_path: Path,
                                                api: str) -> None:
    run_and_check(vllm_server, api, tmp_path / api)


def test_every_prompt_is_the_asked_size_with_another_tokenizer(vllm_server: VllmServer,
                                                               tmp_path: Path) -> None:
    probe = probe_env(setup=False)
    assert probe.env is not None  # the session's server runs from it
    model_dir = build_tiny_model(probe.env, tmp_path / f"tiny-vocab{SECOND_VOCABULARY}",
                                 vocab_size=SECOND_VOCABULARY)
    with start_vllm(probe.env, model_dir, cpus=vllm_server.cpus or None,
                    log_path=tmp_path / "vllm-second.log", startup_timeout_s=600) as second:
        print(f"second vLLM up in {second.startup_s:.0f} s")
        for api in APIS:
            run_and_check(second, api, tmp_path / api)
