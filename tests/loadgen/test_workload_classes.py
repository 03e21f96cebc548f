"""One Locust user class per workload: several workloads of one kind all run, each under
its own name, with the weight its workload file gives it.

The unit tests use plain classes for the locustfiles' ones: importing Locust here would
monkey-patch the whole test process. Locust itself picks the classes in the runs below."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from tests.main_job.test_run_command import zerohop
from zerohop.loadgen.selection import plan_candidates, workload_class
from zerohop.workloads.errors import WorkloadError
from zerohop.workloads.inputs import load_workloads

TWO_FLOODS = """
workloads:
  - kind: short_query_flood
    name: light
    weight: 1
    input_tokens: 16
    max_tokens: 4
    load: {kind: closed, think_time_s: 0.05}
  - kind: short_query_flood
    name: heavy
    weight: 5
    input_tokens: 16
    max_tokens: 4
    load: {kind: closed, think_time_s: 0.05}
"""


class ShortQueryFlood:
    """Stands for the locustfile's class of the kind, with a weight of its own."""

    workload_kind = "short_query_flood"
    default_workload_file = "short_query_flood.yaml"
    weight = 4


class LoRAMix:
    workload_kind = "lora_mix"
    default_workload_file = "lora_mix.yaml"
    weight = 2


def _file(tmp_path: Path, text: str, name: str = "w.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _classes(templates: tuple[type, ...], *files: Path) -> list[Any]:
    found = plan_candidates(templates, load_workloads(files), named=())
    return [workload_class(c.template, c.load(), c.name) for c in found]


@pytest.mark.unit
def test_each_workload_of_a_kind_gets_its_own_class_spec_and_yaml_weight(
        tmp_path: Path) -> None:
    classes = _classes((ShortQueryFlood,), _file(tmp_path, TWO_FLOODS))
    assert [c.__name__ for c in classes] == ["light", "heavy"]
    assert [c.weight for c in classes] == [1, 5]  # the file's, not the class's 4
    assert [c.workload_spec.name for c in classes] == ["light", "heavy"]
    assert all(issubclass(c, ShortQueryFlood) for c in classes)


@pytest.mark.unit
def test_a_workload_without_weight_keeps_its_class_weight(tmp_path: Path) -> None:
    wl = _file(tmp_path, "kind: short_query_flood\nname: plain\n")
    assert [(c.__name__, c.weight) for c in _classes((ShortQueryFlood,), wl)] == [("plain", 4)]


@pytest.mark.unit
def test_a_class_no_file_names_offers_its_default_under_its_own_name(tmp_path: Path) -> None:
    wl = _file(tmp_path, TWO_FLOODS)
    found = plan_candidates((ShortQueryFlood, LoRAMix), load_workloads([wl]), named=())
    assert [(c.name, c.asked) for c in found] == [
        ("light", True), ("heavy", True), ("LoRAMix", False)]
    assert found[2].load().name == "lora_mix"  # the shipped lora_mix.yaml
    named = plan_candidates((ShortQueryFlood, LoRAMix), [], named={"LoRAMix"})
    assert [(c.name, c.asked) for c in named] == [("ShortQueryFlood", False), ("LoRAMix", True)]
    # `--only LoRAMix` with a file of floods: the floods have no class, so do not run
    assert [c.name for c in plan_candidates((LoRAMix,), load_workloads([wl]), named=())
            ] == ["LoRAMix"]


class Conversation:
    """Stands for loadtests/conversation.py's class: not in the default run set."""

    workload_kind = "conversation"
    default_workload_file = "conversation.yaml"
    runs_by_default = False
    weight = 1


@pytest.mark.unit
def test_a_class_not_run_by_default_runs_only_when_a_file_or_the_command_names_it(
        tmp_path: Path) -> None:
    templates = (ShortQueryFlood, Conversation)
    assert [c.name for c in plan_candidates(templates, [], named=())] == ["ShortQueryFlood"]
    named = plan_candidates(templates, [], named={"Conversation"})
    assert [(c.name, c.asked) for c in named] == [("ShortQueryFlood", False),
                                                   ("Conversation", True)]
    assert named[1].load().kind == "conversation"  # the shipped example file
    wl = _file(tmp_path, "kind: conversation\nname: chats\n")
    assert [(c.name, c.asked) for c in plan_candidates(templates, load_workloads([wl]),
                                                       named=())] == [
        ("ShortQueryFlood", False), ("chats", True)]


@pytest.mark.unit
def test_the_shipped_new_kinds_are_not_in_the_default_run_set() -> None:
    import ast

    from zerohop.shipped import locustfiles

    for kind in ("conversation", "shared_prefix"):
        (path,) = locustfiles([kind])
        assigned = {target.id: node.value for cls in ast.parse(path.read_text()).body
                    if isinstance(cls, ast.ClassDef) for node in cls.body
                    if isinstance(node, ast.Assign) for target in node.targets
                    if isinstance(target, ast.Name)}
        value = assigned["runs_by_default"]
        assert isinstance(value, ast.Constant) and value.value is False, path


@pytest.mark.unit
def test_workload_names_are_unique_over_files_and_classes(tmp_path: Path) -> None:
    a = _file(tmp_path, "kind: short_query_flood\nname: same\n", "a.yaml")
    b = _file(tmp_path, "kind: lora_mix\nname: same\nadapters: [x]\n", "b.yaml")
    with pytest.raises(WorkloadError, match=r"b\.yaml: duplicate workload name 'same'"):
        load_workloads([a, b])
    clash = _file(tmp_path, "kind: short_query_flood\nname: LoRAMix\n", "c.yaml")
    with pytest.raises(WorkloadError, match="'LoRAMix' is also the name of a user class"):
        plan_candidates((ShortQueryFlood, LoRAMix), load_workloads([clash]), named=())


@pytest.mark.integration  # runs `zerohop run` (Locust, the embedded target) as a child
@pytest.mark.parametrize("workers", [0, 2])
def test_two_workloads_of_one_kind_both_run_by_their_weights(workers: int,
                                                            tmp_path: Path) -> None:
    """6 users over weights 1 and 5: one runs `light`, five run `heavy` (with workers,
    each worker builds the same classes as the master that dispatches them)."""
    wl = _file(tmp_path, TWO_FLOODS)
    res = zerohop("run", "--workload", str(wl), "--users", "6", "--duration", "8s",
                  "--workers", str(workers), "--no-report", "--results-dir",
                  str(tmp_path / "r"))
    assert res.returncode == 0, res.stderr[-3000:]
    (run,) = [p for p in (tmp_path / "r").iterdir() if p.is_dir()]
    df = pd.read_parquet(run / "requests.parquet")
    counts = df.groupby("workload").size().to_dict()
    assert set(counts) == {"light", "heavy"}, counts
    assert counts["heavy"] >= 2.5 * counts["light"], counts
    assert (df.outcome == "ok").all(), df.outcome.value_counts()
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["workload_selection"]["run"] == ["light", "heavy"]
    assert manifest["status"] == "completed"
