"""Issue 10 §4: API keys from the environment and from config never reach any file the
run writes, any log line, or the report."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.reliability.conftest import (
    child_env,
    files_under,
    locust_cmd,
    occurrences,
    only_run_dir,
    run,
    zerohop_cmd,
)

pytestmark = pytest.mark.integration

ENV_KEYS = {
    "OPENAI_API_KEY": "sk-openai-SECRET-4f1c9e",
    "ANTHROPIC_API_KEY": "sk-ant-SECRET-7d2b11",
}
SIM_KEY = "zh-sim-SECRET-93ab0c"  # given only on the command line / in config


def test_zerohop_run_writes_no_key_anywhere(tmp_path: Path) -> None:
    env = child_env(**ENV_KEYS, ZEROHOP_API_KEY=SIM_KEY)
    res = run(zerohop_cmd(
        "run", "--duration", "4s", "--users", "2", "--only", "ShortQueryFlood",
        "--microbench", "off", "--results-dir", str(tmp_path / "r"), "--name", "secrets",
        "--sim-args", f"--api-key {SIM_KEY}"), env=env, timeout=120)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    run_dir = only_run_dir(tmp_path / "r")
    assert (run_dir / "report.html").exists()
    leaks = occurrences([*ENV_KEYS.values(), SIM_KEY], files_under(tmp_path / "r"),
                        [res.stdout, res.stderr])
    assert not leaks, leaks
    # the key authenticated the requests (so it really travelled): all ok
    import pandas as pd

    assert (pd.read_parquet(run_dir / "requests.parquet").outcome == "ok").all()


def test_key_given_only_in_sim_args_is_redacted(tmp_path: Path) -> None:
    """No environment variable holds this key: it reaches the run only through
    `--sim-args`, which the manifest records as configuration."""
    env = {k: v for k, v in child_env().items()
           if k not in ("ZEROHOP_API_KEY", "OPENAI_API_KEY", "ANTHROPIC_API_KEY")}
    res = run(locust_cmd(
        "--headless", "-u", "2", "-r", "2", "-t", "3s", "--results-dir", str(tmp_path / "r"),
        "--telemetry", "", f"--sim-args=--api-key {SIM_KEY}", "ShortQueryFlood"),
        env=env, timeout=90)
    assert res.returncode in (0, 1), res.stderr[-2000:]  # 1: requests got 401
    leaks = occurrences([SIM_KEY], files_under(tmp_path / "r"), [res.stdout, res.stderr])
    assert not leaks, leaks
