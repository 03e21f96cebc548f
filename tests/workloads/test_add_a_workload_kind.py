"""docs/architecture.md's "Adding a workload kind", followed with a toy kind: two files
written into a temporary folder (the kind's module, the plugin that registers it; its
default YAML), none under src/, and the kind parses, plans and (integration) runs
through `zerohop run --plugin`, its user class made from its entry in the Locust process
(loadtests/plugin_kinds.py), against the embedded target in its own process."""

from __future__ import annotations

import hashlib
import importlib.util
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from zerohop.workloads import kind_registry

REPO = Path(__file__).resolve().parents[2]

TOY_MODULE = '''\
"""A toy workload kind: every request the same size."""

from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from zerohop.workloads.schema.distributions import FixedDist
from zerohop.workloads.kind_registry import WorkloadKind, register_kind
from zerohop.workloads.schema.load_spec import ClosedLoad, ClosedOrOpenLoad
from zerohop.workloads.planners.request_plans import lengths_planner
from zerohop.workloads.schema.workload_base import WorkloadBase


class FixedSizeSpec(WorkloadBase):
    """Every prompt `prompt_tokens` long, every answer `answer_tokens`."""

    kind: Literal["fixed_size"] = Field(description="Workload kind.")
    prompt_tokens: int = Field(default=24, gt=0, description="Prompt length in tokens.")
    answer_tokens: int = Field(default=8, gt=0, description="Output tokens to request.")
    load: ClosedOrOpenLoad = Field(
        default_factory=lambda: ClosedLoad(kind="closed", users=2),
        description="closed (users, think time) or open (rate, arrivals, cap, shape).")


def plan_fixed_size(spec: Any, setup: Any) -> Any:
    return lengths_planner(spec, setup,
                           input_tokens=FixedDist(type="fixed", value=spec.prompt_tokens),
                           output_tokens=FixedDist(type="fixed", value=spec.answer_tokens))


register_kind(WorkloadKind(
    "fixed_size", FixedSizeSpec, "FixedSize",
    default_file=str(Path(__file__).with_name("fixed_size.yaml")),
    planner=plan_fixed_size, runs_by_default=True))
'''

TOY_YAML = """\
kind: fixed_size
name: same_size
prompt_tokens: 24
answer_tokens: 8
load: {kind: closed, users: 2}
"""

def _write_toy_kind(folder: Path) -> list[Path]:
    """The walkthrough's files, in its order."""
    files = {"fixed_size_kind.py": TOY_MODULE, "fixed_size.yaml": TOY_YAML}
    for name, text in files.items():
        (folder / name).write_text(text, encoding="utf-8")
    return [folder / name for name in files]


def _tree_digest(root: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            digest.update(str(path.relative_to(root)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()


@pytest.mark.unit
def test_a_toy_kind_in_two_files_parses_and_plans(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from zerohop.runner.plan import classes_for, users_for
    from zerohop.workloads.inputs import check_inputs, default_workload, load_workloads
    from zerohop.workloads.kind_planner import is_session_planner, make_workload_planner
    from zerohop.workloads.planners.worker_load import worker_setup

    src_before = _tree_digest(REPO / "src")
    monkeypatch.setattr(kind_registry, "_KINDS", dict(kind_registry._KINDS))  # undone after
    written = _write_toy_kind(tmp_path)
    assert len(written) <= 3
    assert sorted(p for p in tmp_path.iterdir()) == sorted(written)
    # the module registers the kind when it is imported (what --plugin does)
    module_spec = importlib.util.spec_from_file_location(
        "fixed_size_kind", tmp_path / "fixed_size_kind.py")
    assert module_spec is not None and module_spec.loader is not None
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    entry = kind_registry.workload_kind("fixed_size")
    assert entry.spec is module.FixedSizeSpec
    assert kind_registry.kind_of_class("FixedSize") == "fixed_size"

    (spec,) = load_workloads([tmp_path / "fixed_size.yaml"])
    assert isinstance(spec, module.FixedSizeSpec)
    assert (spec.name, spec.prompt_tokens, spec.answer_tokens) == ("same_size", 24, 8)
    check_inputs(spec)  # it points at nothing
    assert default_workload("fixed_size", entry.default_file) == spec
    # `zerohop run` names its class and sizes -u from it, as for a shipped kind
    assert classes_for([spec]) == ["FixedSize"]
    assert users_for([spec], ["FixedSize"]) == 2

    planner = make_workload_planner(spec, worker_setup(spec, seed=7, worker_index=0,
                                                       worker_count=1))
    assert not is_session_planner(planner)
    requests = [planner.next_request() for _ in range(5)]
    assert {(r.workload, r.kind, r.target_input_tokens, r.max_tokens) for r in requests} == {
        ("same_size", "fixed_size", 24, 8)}
    assert len({r.prompt for r in requests}) == 5  # each its own prompt
    assert _tree_digest(REPO / "src") == src_before


@pytest.mark.unit
def test_a_kind_whose_spec_says_another_kind_is_refused() -> None:
    from zerohop.workloads.planners.request_plans import request_planner
    from zerohop.workloads.schema.kinds import ShortQueryFloodSpec

    with pytest.raises(ValueError, match="Literal"):
        kind_registry.WorkloadKind("flood_again", ShortQueryFloodSpec, "FloodAgain",
                                   "short_query_flood.yaml", request_planner)
    flood = kind_registry.workload_kind("short_query_flood")
    with pytest.raises(ValueError, match="already registered"):
        kind_registry.register_kind(kind_registry.WorkloadKind(
            "short_query_flood", ShortQueryFloodSpec, "Flood2", "x.yaml", request_planner))
    assert kind_registry.register_kind(flood) is flood  # the same entry again: no change
    assert kind_registry.workload_kind("short_query_flood") is flood


@pytest.mark.unit
def test_each_shipped_kind_says_sessions_as_its_locustfile_does() -> None:
    """`sessions` picks the base of the class `loadtests/plugin_kinds.py` makes for a
    plugin's kind; the shipped locustfiles, written out, must agree with their entries."""
    for entry in kind_registry.workload_kinds():
        text = (REPO / "loadtests" / f"{entry.name}.py").read_text(encoding="utf-8")
        assert ("(SessionUser)" in text) == entry.sessions, entry.name


@pytest.fixture(scope="module")
def toy_kind_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, str, str]:
    """One `zerohop run --plugin fixed_size_kind --only FixedSize`, started cold (the
    command's choices are built after its plugins load), and its `--help`: (the kind's
    folder, the run's folder, the run's output, the help)."""
    root = tmp_path_factory.mktemp("toy_kind")
    kind_dir = root / "kind"
    kind_dir.mkdir()
    _write_toy_kind(kind_dir)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(kind_dir), str(REPO)]),
           "PYTHONUNBUFFERED": "1"}
    zerohop = [sys.executable, "-m", "zerohop", "run", "--plugin", "fixed_size_kind"]
    results = root / "results"
    res = subprocess.run(
        [*zerohop, "--only", "FixedSize", "--requests", "6", "--telemetry", "none",
         "--microbench", "off", "--results-dir", str(results)],
        capture_output=True, text=True, timeout=180, cwd=root, env=env)
    assert res.returncode == 0, (res.stdout[-2000:], res.stderr[-3000:])
    helped = subprocess.run([*zerohop, "--help"], capture_output=True, text=True,
                            timeout=60, cwd=root, env=env)
    assert helped.returncode == 0, helped.stderr[-2000:]
    (run,) = [p for p in results.iterdir() if p.is_dir()]
    return kind_dir, run, res.stdout + res.stderr, helped.stdout


@pytest.mark.integration  # `zerohop run` cold: Locust and the embedded target as processes
def test_a_toy_kind_runs_through_zerohop_run_and_records_its_workload(
        toy_kind_run: tuple[Path, Path, str, str]) -> None:
    import pandas as pd

    kind_dir, run, output, _ = toy_kind_run
    assert "Traceback" not in output
    frame = pd.read_parquet(run / "requests.parquet")
    assert len(frame) == 6, textwrap.shorten(output, 2000)
    assert set(frame["workload"]) == {"same_size"}
    assert set(frame["outcome"]) == {"ok"}
    assert set(frame["target_input_tokens"]) == {24}
    assert set(frame["output_tokens"]) == {8}
    assert sorted(p.name for p in kind_dir.iterdir() if p.is_file()) == [
        "fixed_size.yaml", "fixed_size_kind.py"]


@pytest.mark.integration  # reads the module's one cold `zerohop run --help` (toy_kind_run)
def test_the_plugins_kind_is_an_only_choice_and_the_flag_is_in_the_help(
        toy_kind_run: tuple[Path, Path, str, str]) -> None:
    help_text = " ".join(toy_kind_run[3].split())
    assert "--plugin" in help_text
    only = help_text[help_text.index("--only"):]
    assert "FixedSize" in only[:only.index("--users")]
