"""A planned request in the shape each API takes (client/api_request.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from zerohop.client.api_adapters import create_api_adapter
from zerohop.client.api_request import UnfitRequest, generation_for, to_request_spec
from zerohop.workloads.planners.request_plans import make_planner
from zerohop.workloads.yaml_io import load_workload_file

pytestmark = pytest.mark.unit

_SPEC = """
kind: short_query_flood
name: q
input_tokens: 32
max_tokens: 4
load: {kind: closed, users: 1}
"""
_IDS_SPEC = """
kind: short_query_flood
name: ids
api: openai-completions
prompt_format: token_ids
input_tokens: 32
max_tokens: 4
load: {kind: closed, users: 1}
"""


def _planned(tmp_path: Path, text: str) -> Any:
    path = tmp_path / "w.yaml"
    path.write_text(text)
    (spec,) = load_workload_file(path).workloads
    return make_planner(spec, seed=1, worker_index=0, worker_count=1).next_request()


@pytest.mark.parametrize("api, field", [
    ("openai-completions", "prompt"), ("openai-chat", "messages"), ("anthropic", "messages"),
])
def test_every_api_gets_the_prompt_in_its_own_shape(tmp_path: Path, api: str, field: str
                                                    ) -> None:
    planned = _planned(tmp_path, _SPEC)
    spec = to_request_spec(planned, api, "m")
    body = json.loads(create_api_adapter(api).build_request(
        spec.generation, api_key=None, request_id="r").body)
    if field == "prompt":
        assert body["prompt"] == planned.prompt and "messages" not in body
    else:
        assert body["messages"] == [{"role": "user", "content": planned.prompt}]
        assert "prompt" not in body
    assert spec.target_input_tokens == planned.target_input_tokens


def test_token_ids_go_as_ids_on_completions_and_are_refused_on_chat(tmp_path: Path) -> None:
    planned = _planned(tmp_path, _IDS_SPEC)
    generation = generation_for(planned, "openai-completions", "m")
    body = json.loads(create_api_adapter("openai-completions").build_request(
        generation, api_key=None, request_id="r").body)
    assert body["prompt"] == planned.token_ids and len(body["prompt"]) == 32
    with pytest.raises(UnfitRequest, match="token ids"):
        generation_for(planned, "openai-chat", "m")
