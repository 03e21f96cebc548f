"""How many Locust users `zerohop run` starts, and who decides how they split: without
`--users` the workload files (each closed workload's `users`, one slot for each other
workload); with `--users N` the command line, N users by weight (`--users-by-weight`
tells every Locust process). The runs themselves: tests/loadgen/test_workload_classes.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from zerohop.cli.main_job import plan_from_flags, run_command
from zerohop.runner.locust_process import locust_command
from zerohop.runner.plan import RunPlan, users_for
from zerohop.workloads.inputs import load_workloads

pytestmark = pytest.mark.unit

TWO_CLOSED = """
workloads:
  - {kind: short_query_flood, name: one, load: {kind: closed, users: 1}}
  - {kind: short_query_flood, name: three, load: {kind: closed, users: 3}}
"""


def _plan(*args: str) -> RunPlan:
    ctx = run_command.make_context("run", list(args))
    return plan_from_flags(dict(ctx.params))


def _u_and_override(plan: RunPlan, tmp_path: Path) -> tuple[str, bool]:
    cmd = locust_command(plan, "http://127.0.0.1:9", tmp_path)
    return cmd[cmd.index("-u") + 1], "--users-by-weight" in cmd


def test_the_files_set_the_users_unless_the_command_line_does(tmp_path: Path) -> None:
    wl = tmp_path / "two.yaml"
    wl.write_text(TWO_CLOSED)
    files = _plan("--workload", str(wl))
    assert (files.users, files.users_from_files) == (4, True)  # 1 + 3
    assert _u_and_override(files, tmp_path) == ("4", False)
    flag = _plan("--workload", str(wl), "--users", "8")
    assert (flag.users, flag.users_from_files) == (8, False)
    assert _u_and_override(flag, tmp_path) == ("8", True)
    # a layer comparison prices one user's hop unless told otherwise
    layer = _plan("--workload", str(wl), "--compare-layer")
    assert _u_and_override(layer, tmp_path) == ("1", True)


def test_the_default_run_has_a_user_for_every_default_workload(tmp_path: Path) -> None:
    """The four shipped defaults: the flood (open) and the trace one slot each, the long
    documents 1 and the LoRA mix 2 closed-loop users."""
    plan = _plan()
    assert (plan.users, plan.users_from_files) == (1 + 1 + 2 + 1, True)
    assert _u_and_override(plan, tmp_path) == ("5", False)


@pytest.mark.parametrize("classes, expected", [
    ((), 1 + 1 + 2 + 1),                    # the file's four (open, closed 1 and 2, trace)
    (("LoRAMix",), 2),                      # only the file's LoRA mix
    (("LoRAMix", "Conversation"), 2 + 4),   # and the conversation class's default file
])
def test_users_for_counts_the_workloads_the_run_runs(classes: tuple[str, ...],
                                                     expected: int) -> None:
    specs: list[Any] = load_workloads([Path(__file__).parents[2] / "workloads" / "all.yaml"])
    assert users_for(specs, classes) == expected
