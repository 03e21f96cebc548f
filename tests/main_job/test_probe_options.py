"""`zerohop run --probe-rate`'s settings: checked by the CLI, carried to Locust in the
run's plan, and the probe's idle phase added to Locust's run time (the load still runs
its whole duration after it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.main_job.test_run_settings import _plan, _read_back
from zerohop.core.exit_codes import RunError
from zerohop.runner.locust_process import locust_command, write_plan

pytestmark = pytest.mark.unit


def _run_time(cmd: list[str]) -> str:
    return cmd[cmd.index("-t") + 1]


def test_the_probe_reaches_locust_through_the_plan(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    plan = _plan(tmp_path, "--probe-rate", "2.5", "--probe-idle", "7s",
                 "--probe-prompt-tokens", "32", "--probe-output-tokens", "8",
                 "--duration", "20s")
    assert (plan.probe_rate, plan.probe_idle_s) == (2.5, 7.0)
    assert _run_time(locust_command(plan, "http://127.0.0.1:9", tmp_path)) == "27s"
    write_plan(plan, tmp_path)
    settings = _read_back(tmp_path, {}, monkeypatch)
    assert (settings.probe_rate, settings.probe_idle_s, settings.probe_prompt_tokens,
            settings.probe_output_tokens) == (2.5, 7.0, 32, 8)


def test_without_a_probe_nothing_changes(tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    plan = _plan(tmp_path, "--duration", "20s")
    assert plan.probe_rate == 0.0
    assert _run_time(locust_command(plan, "http://127.0.0.1:9", tmp_path)) == "20s"
    write_plan(plan, tmp_path)
    assert _read_back(tmp_path, {}, monkeypatch).probe_rate == 0.0


@pytest.mark.parametrize(("args", "message"), [
    (("--probe-rate", "-1"), "--probe-rate must be >= 0"),
    (("--probe-rate", "1", "--probe-output-tokens", "0"), "--probe-output-tokens must be"),
    (("--probe-rate", "1", "--probe-idle", "soon"), "--probe-idle: 'soon'"),
])
def test_bad_probe_flags_are_one_line(tmp_path: Path, args: tuple[str, ...],
                                      message: str) -> None:
    with pytest.raises(RunError, match=message):
        _plan(tmp_path, *args)
