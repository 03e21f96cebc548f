"""ZEROHOP_REQUIRE_GPU=1 turns a skipped `gpu` test into a failed one (conftest hook)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from tests.microbench.conftest import REQUIRE_GPU_ENV, fail_required_gpu_skip

pytestmark = pytest.mark.unit


def _report(outcome: str, **extra: Any) -> pytest.TestReport:
    longrepr = ("tests/microbench/x.py", 3, "Skipped: needs a CUDA device") if (
        outcome == "skipped") else None
    report = pytest.TestReport(
        nodeid="x.py::t", location=("x.py", 3, "t"), keywords={}, outcome=outcome,
        longrepr=longrepr, when="setup",
    )
    for key, value in extra.items():
        setattr(report, key, value)
    return report


def _item(*, gpu: bool) -> Any:
    return SimpleNamespace(
        nodeid="x.py::t",
        get_closest_marker=lambda name: object() if gpu and name == "gpu" else None,
    )


def test_a_skipped_gpu_test_fails_when_a_gpu_is_required(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(REQUIRE_GPU_ENV, "1")
    report = _report("skipped")
    fail_required_gpu_skip(_item(gpu=True), report)
    assert report.failed
    assert str(report.longrepr) == (
        "ZEROHOP_REQUIRE_GPU=1 but x.py::t skipped: Skipped: needs a CUDA device"
    )


@pytest.mark.parametrize(
    ("env", "gpu", "report"),
    [
        (None, True, _report("skipped")),  # not required: a skip stays a skip
        ("0", True, _report("skipped")),
        ("1", False, _report("skipped")),  # not a gpu test
        ("1", True, _report("passed")),
        ("1", True, _report("skipped", wasxfail="known")),  # an xfail is not a skip
    ],
)
def test_everything_else_is_left_alone(
    monkeypatch: pytest.MonkeyPatch, env: str | None, gpu: bool, report: pytest.TestReport
) -> None:
    if env is None:
        monkeypatch.delenv(REQUIRE_GPU_ENV, raising=False)
    else:
        monkeypatch.setenv(REQUIRE_GPU_ENV, env)
    before = (report.outcome, report.longrepr)
    fail_required_gpu_skip(_item(gpu=gpu), report)
    assert (report.outcome, report.longrepr) == before
