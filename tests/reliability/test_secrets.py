"""Issue 10 §4: API keys from the environment, the command line, a config file or a
`user:pass@host` URL never reach any file a command writes, any log line, or a report.

Every command that can take a key is run with one (`run`, plain Locust, `selfcheck`,
`sweep`, `capacity`, `compare`, `simulate`, `nightly`), and what it leaves is searched
for each key as written, base64-encoded, URL-encoded, and inside Parquet by value
(tests/reliability/secret_scan.py). The keys hold characters URL-encoding changes.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pandas as pd
import pytest

from tests.reliability.conftest import (
    FLOOD_WORKLOAD,
    child_env,
    files_under,
    locust_cmd,
    only_run_dir,
    run,
    zerohop_cmd,
)
from tests.reliability.secret_scan import leaks
from zerohop.sim.launcher import start_sim

pytestmark = pytest.mark.integration

ENV_KEYS = {
    "OPENAI_API_KEY": "sk-openai-SECRET/4f+1c=9e",
    "ANTHROPIC_API_KEY": "sk-ant-SECRET/7d+2b=11",
    "MY_SERVICE_TOKEN": "tok-SERVICE/SECRET+55",
}
SIM_KEY = "zh-sim-SECRET/93+ab=0c"  # the embedded target's key, given on the command line
URL_PASSWORD = "hunter2-SECRET-URLPASS"
ALL_KEYS = [*ENV_KEYS.values(), SIM_KEY, URL_PASSWORD]


def keyed_env(**extra: str) -> dict[str, str]:
    return child_env(**ENV_KEYS, ZEROHOP_API_KEY=SIM_KEY, **extra)


def assert_no_leak(*roots: Path, outputs: tuple[str, ...] = ()) -> None:
    found = leaks(ALL_KEYS, files_under(*roots), outputs)
    assert not found, found


def test_zerohop_run_writes_no_key_anywhere(tmp_path: Path) -> None:
    res = run(zerohop_cmd(
        "run", "--duration", "6s", "--users", "2", "--only", "ShortQueryFlood",
        "--microbench", "off", "--results-dir", str(tmp_path / "r"), "--name", "secrets",
        "--sim-args", f"--api-key {SIM_KEY}"), env=keyed_env(), timeout=120)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    run_dir = only_run_dir(tmp_path / "r")
    assert (run_dir / "report.html").exists()
    assert_no_leak(tmp_path / "r", outputs=(res.stdout, res.stderr))
    # the key authenticated the requests (so it really travelled): all ok
    assert (pd.read_parquet(run_dir / "requests.parquet").outcome == "ok").all()


def test_a_password_in_the_host_url_is_not_written(tmp_path: Path) -> None:
    with start_sim(["--seed", "5"]) as sim:
        host = sim.url.replace("://", f"://alice:{URL_PASSWORD}@")
        res = run(zerohop_cmd(
            "run", "--host", host, "--duration", "3s", "--users", "2",
            "--only", "ShortQueryFlood", "--microbench", "off", "--telemetry", "loadgen",
            "--results-dir", str(tmp_path / "r")), env=keyed_env(), timeout=120)
    assert "Traceback" not in res.stderr, res.stderr[-3000:]
    assert (tmp_path / "r").is_dir(), res.stderr[-2000:]
    assert_no_leak(tmp_path / "r", outputs=(res.stdout, res.stderr))


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
    assert_no_leak(tmp_path / "r", outputs=(res.stdout, res.stderr))


def test_selfcheck_writes_no_key(tmp_path: Path) -> None:
    res = run(zerohop_cmd(
        "selfcheck", "--rate", "5", "--duration", "5s", "--results-dir", str(tmp_path / "r"),
        "--sim-args", f"--api-key {SIM_KEY}"), env=keyed_env(), timeout=120)
    assert res.returncode in (0, 1), res.stdout[-2000:] + res.stderr[-2000:]
    run_dir = only_run_dir(tmp_path / "r")
    assert (pd.read_parquet(run_dir / "requests.parquet").outcome == "ok").all()
    assert_no_leak(tmp_path / "r", outputs=(res.stdout, res.stderr))


def test_sweep_capacity_and_compare_write_no_key(tmp_path: Path) -> None:
    """A sweep with a keyed target, then the commands that read its folders."""
    env = keyed_env()
    sweep = run(zerohop_cmd(
        "sweep", "--rates", "2,4", "--duration", "3s", "--only", "ShortQueryFlood",
        "--telemetry", "loadgen", "--results-dir", str(tmp_path / "r"),
        "--sim-args", f"--api-key {SIM_KEY}"), env=env, timeout=240)
    assert sweep.returncode in (0, 1), sweep.stdout[-2000:] + sweep.stderr[-2000:]
    sweep_dir = only_run_dir(tmp_path / "r")
    points = sorted(p.parent for p in sweep_dir.rglob("requests.parquet"))
    assert len(points) == 2, points
    capacity = run(zerohop_cmd("capacity", str(sweep_dir), "--slo", "ttft_p99_ms=500",
                               "--traffic", "10", "--gpu-cost-per-hour", "2"),
                   env=env, timeout=120)
    assert capacity.returncode == 0, capacity.stderr[-2000:]
    compare = run(zerohop_cmd("compare", *map(str, points), "-o", str(tmp_path / "cmp.html"),
                              "--boot", "200"), env=env, timeout=120)
    assert compare.returncode == 0, compare.stderr[-2000:]
    assert (tmp_path / "cmp.html").exists()
    assert_no_leak(tmp_path, outputs=(sweep.stdout, sweep.stderr, capacity.stdout,
                                      capacity.stderr, compare.stdout, compare.stderr))


def test_simulate_writes_no_key(tmp_path: Path) -> None:
    workload = tmp_path / "open.yaml"
    workload.write_text("kind: short_query_flood\nname: f\nmax_tokens: 8\n"
                        "load: {kind: open, rate_rps: 20}\n")
    res = run(zerohop_cmd("simulate", "--workload", str(workload), "--duration", "5s",
                          "--results-dir", str(tmp_path / "r"), "--report"),
              env=keyed_env(), timeout=120)
    assert res.returncode in (0, 1), res.stdout[-2000:] + res.stderr[-2000:]
    assert (only_run_dir(tmp_path / "r") / "requests.parquet").exists()
    assert_no_leak(tmp_path / "r", outputs=(res.stdout, res.stderr))


def test_nightly_writes_no_key(tmp_path: Path) -> None:
    """The key in the profile's target options, as a nightly against a keyed embedded
    target would hold it."""
    workload = tmp_path / "flood.yaml"
    workload.write_text(FLOOD_WORKLOAD.format(max_tokens=16, users=2))
    profile = tmp_path / "nightly.yaml"
    profile.write_text(textwrap.dedent(f"""\
        name: secrets
        target:
          sim_args: "--api-key {SIM_KEY} --max-num-seqs 8"
        load:
          workloads: [{workload}]
          only: [ShortQueryFlood]
          rate: 3
          duration_s: 3
        samples: 2
        microbench: "off"
        """))
    history = tmp_path / "history"
    res = run(zerohop_cmd("nightly", "--config", str(profile), "--history", str(history)),
              env=keyed_env(), timeout=180)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    entries = [json.loads(line) for line in (history / "history.jsonl").read_text().splitlines()]
    assert len(entries) == 1
    assert_no_leak(history, outputs=(res.stdout, res.stderr))
