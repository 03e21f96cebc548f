"""A URL that serves HTTP but no LLM API (here `python -m http.server`) is refused in one
line before any load, with or without --model: nothing is measured, no folder written.
So is it, and a URL where nothing answers, under plain Locust (`locust -f loadtests/`):
no user is spawned to fail with a traceback."""

from __future__ import annotations

import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.loadgen.conftest import run_locust
from tests.main_job.test_run_command import assert_one_line_error, zerohop
from tests.reliability.conftest import free_port, stop_group, wait_for

pytestmark = pytest.mark.integration


@pytest.fixture()
def file_server(tmp_path: Path) -> Iterator[str]:
    port = free_port()
    served = tmp_path / "served"
    served.mkdir()
    proc = subprocess.Popen([sys.executable, "-m", "http.server", str(port), "--bind",
                             "127.0.0.1"], cwd=served, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True, text=True)
    url = f"http://127.0.0.1:{port}"

    def up() -> bool:
        try:
            with urllib.request.urlopen(url + "/", timeout=1):
                return True
        except OSError:
            return False

    try:
        assert wait_for(up, 20)
        yield url
    finally:
        stop_group(proc)


@pytest.mark.parametrize("model", [[], ["--model", "foo"]])
def test_a_file_server_is_refused_before_any_load(file_server: str, model: list[str],
                                                  tmp_path: Path) -> None:
    res = zerohop("run", "--host", file_server, *model, "--duration", "5s",
                  "--only", "ShortQueryFlood", "--telemetry", "none",
                  "--results-dir", str(tmp_path / "r"), timeout=60)
    assert_one_line_error(res, 2, file_server, "no LLM API", "/v1/chat/completions")
    assert len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("target, code, words", [
    ("file_server", 2, ["no LLM API", "/v1/chat/completions"]),
    ("nothing", 3, ["unreachable"]),
])
def test_plain_locust_refuses_a_target_before_spawning(request: pytest.FixtureRequest,
                                                       target: str, code: int,
                                                       words: list[str], tmp_path: Path) -> None:
    host = (request.getfixturevalue("file_server") if target == "file_server"
            else f"http://127.0.0.1:{free_port()}")  # nothing listens there
    res = run_locust(["--headless", "-H", host, "-u", "2", "-r", "2", "-t", "5s",
                      "--results-dir", str(tmp_path / "r")], timeout=60)
    assert_one_line_error(res, code, host, *words)
    zerohop_lines = [line for line in res.stderr.splitlines() if "zerohop: error:" in line]
    assert len(zerohop_lines) == 1, res.stderr
    assert not (tmp_path / "r").exists()
