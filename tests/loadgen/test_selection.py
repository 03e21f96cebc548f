"""Which workloads a run runs against a given target (pure: no process, no socket)."""

from __future__ import annotations

from typing import Any

import pytest

from zerohop.loadgen.selection import Selection, select_workloads, with_resolved_adapters
from zerohop.loadgen.target_models import TargetModels, parse_models
from zerohop.workloads.errors import WorkloadError
from zerohop.workloads.yaml_io import parse_workloads

pytestmark = pytest.mark.unit

# /v1/models as vLLM answers with `--enable-lora --lora-modules a0=... a1=...`
VLLM_WITH_ADAPTERS = {"object": "list", "data": [
    {"id": "tiny", "object": "model", "root": "/models/tiny", "parent": None},
    *({"id": f"a{i}", "object": "model", "root": f"/loras/a{i}", "parent": "tiny"}
      for i in range(4)),
]}
# an OpenAI-style server: models, no `parent` at all
PLAIN = {"object": "list", "data": [{"id": "gpt-x", "object": "model"}]}


def _spec(text: dict[str, Any]) -> Any:
    return parse_workloads(text).workloads[0]


def _lora(**fields: Any) -> Any:
    return _spec({"kind": "lora_mix", "name": "lora_mix", "adapters": "from_target", **fields})


FLOOD = {"kind": "short_query_flood", "name": "flood"}


def test_vllm_models_list_its_adapters_under_their_base() -> None:
    target = parse_models(VLLM_WITH_ADAPTERS)
    assert target.bases == ("tiny",)
    assert target.adapters_of("tiny") == ("a0", "a1", "a2", "a3")
    assert parse_models(PLAIN).adapters == {}


def test_a_from_target_mix_takes_the_targets_adapters() -> None:
    lora = _lora()
    decision = select_workloads([("LoRAMix", lora)], asked=set(),
                                target=parse_models(VLLM_WITH_ADAPTERS))
    assert decision.run == ["LoRAMix"]
    assert decision.adapters == {"LoRAMix": ["a0", "a1", "a2", "a3"]}
    fitted = with_resolved_adapters(lora, decision.adapters["LoRAMix"])
    assert fitted.adapters.resolved_names() == ["a0", "a1", "a2", "a3"]
    capped = select_workloads([("LoRAMix", _lora(adapters={"from_target": True,
                                                           "max_count": 2}))],
                              asked=set(), target=parse_models(VLLM_WITH_ADAPTERS))
    assert capped.adapters["LoRAMix"] == ["a0", "a1"]


def test_a_default_mix_against_a_target_without_adapters_is_left_out_and_said() -> None:
    decision = select_workloads([("ShortQueryFlood", _spec(FLOOD)), ("LoRAMix", _lora())],
                                asked=set(), target=parse_models(PLAIN))
    assert decision.run == ["ShortQueryFlood"]
    assert "no LoRA adapters" in decision.left_out["LoRAMix"]
    assert "gpt-x" in decision.left_out["LoRAMix"]
    assert decision.notes() == [f"zerohop: LoRAMix left out: {decision.left_out['LoRAMix']}"]
    # it travels to the workers as it is
    assert Selection.from_json(decision.to_json()) == decision


def test_an_asked_for_mix_against_a_target_without_adapters_refuses() -> None:
    with pytest.raises(WorkloadError) as caught:
        select_workloads([("LoRAMix", _lora())], asked={"LoRAMix"}, target=parse_models(PLAIN))
    assert "\n" not in str(caught.value) and "gpt-x (no adapters)" in str(caught.value)


def test_named_adapters_the_target_does_not_serve_refuse_with_what_it_has() -> None:
    lora = _spec({"kind": "lora_mix", "name": "mine", "adapters": {"count": 8}})
    with pytest.raises(WorkloadError) as caught:
        # refused even as a default: a file that names adapters is somebody's choice
        select_workloads([("LoRAMix", lora)], asked=set(),
                         target=parse_models(VLLM_WITH_ADAPTERS))
    message = str(caught.value)
    assert "\n" not in message
    assert "lora-0" in message and "lora-7" in message
    assert "tiny (adapters: a0, a1, a2, a3)" in message


def test_a_model_the_target_does_not_serve_refuses() -> None:
    target = parse_models(VLLM_WITH_ADAPTERS)
    with pytest.raises(WorkloadError, match="models the target does not serve: big"):
        select_workloads([("ShortQueryFlood", _spec({**FLOOD, "model": "big"}))],
                         asked=set(), target=target)
    with pytest.raises(WorkloadError, match="does not serve: other"):
        select_workloads([("ShortQueryFlood", _spec(FLOOD))], asked=set(), target=target,
                         model_flag="other")
    # an adapter is a model it serves
    ok = select_workloads([("ShortQueryFlood", _spec({**FLOOD, "model": "a2"}))],
                          asked=set(), target=target)
    assert ok.run == ["ShortQueryFlood"]


def test_a_missing_trace_leaves_a_default_out_and_refuses_an_asked_one(tmp_path: Any) -> None:
    def trace() -> Any:  # a shipped file whose trace is not here fails to load
        return _spec({"kind": "trace_replay", "name": "t", "trace": str(tmp_path / "none.csv")})

    decision = select_workloads([("ShortQueryFlood", _spec(FLOOD)), ("TraceReplay", trace)],
                                asked=set(), target=None)
    assert decision.run == ["ShortQueryFlood"] and "TraceReplay" in decision.left_out
    with pytest.raises(WorkloadError, match=r"TraceReplay: .*not found"):
        select_workloads([("TraceReplay", trace)], asked={"TraceReplay"}, target=None)


def test_nothing_left_to_run_is_an_error() -> None:
    with pytest.raises(WorkloadError, match="no workload can run"):
        select_workloads([("LoRAMix", _lora())], asked=set(), target=TargetModels(("m",)))


def test_adapters_from_target_in_yaml_shorthand_and_validation() -> None:
    assert _lora().adapters.from_target
    with pytest.raises(WorkloadError, match="adapters"):
        _spec({"kind": "lora_mix", "name": "x", "adapters": {"names": ["a"], "from_target": True}})
    with pytest.raises(WorkloadError, match="adapters"):
        _spec({"kind": "lora_mix", "name": "x", "adapters": {"names": ["a"], "max_count": 1}})
    with pytest.raises(ValueError, match="resolve them first"):
        _lora().adapters.resolved_names()
