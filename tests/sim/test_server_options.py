"""Server options: API key, KV-cache exhaustion in-stream, CLI errors."""

from __future__ import annotations

import json
import os

import psutil
import pytest
from click.testing import CliRunner

from zerohop.proxy.proxy_command import proxy_command
from zerohop.sim.launcher import start_sim
from zerohop.sim.sim_command import sim_command

from .conftest import MODEL
from .wire import request


@pytest.mark.integration
def test_api_key_and_out_of_memory_in_stream() -> None:
    with start_sim(["--num-gpu-blocks", "10", "--api-key", "sekret"]) as sim:
        body = {
            "model": MODEL,
            "prompt": list(range(100)),
            "max_tokens": 200,
            "stream": True,
            "ignore_eos": True,
        }
        denied = request(sim.url, "/v1/completions", body)
        assert denied.status == 401
        auth = {"authorization": "Bearer sekret"}
        r = request(sim.url, "/v1/completions", body, headers=auth)
        assert r.status == 200 and r.complete
        errors = [json.loads(line) for line in r.data_lines() if '"error"' in line]
        assert errors and errors[0]["error"]["type"] == "out_of_memory"
        assert r.data_lines()[-1] == "[DONE]"
        too_long = dict(body, prompt=list(range(400)))
        rejected = request(sim.url, "/v1/completions", too_long, headers={"x-api-key": "sekret"})
        assert rejected.status == 400 and "never fit" in rejected.json()["error"]["message"]
        assert "sekret" not in sim.stderr_tail()


@pytest.mark.unit
def test_cli_config_errors_exit_2_and_name_the_field() -> None:
    result = CliRunner().invoke(sim_command, ["--gpu", "tpu-v9"])
    assert result.exit_code == 2 and "unknown gpu 'tpu-v9'" in result.output
    result = CliRunner().invoke(proxy_command, ["--upstream", "ftp://x"])
    assert result.exit_code == 2 and "upstream" in result.output


@pytest.mark.unit
def test_cli_help_lists_the_options() -> None:
    result = CliRunner().invoke(sim_command, ["--help"])
    assert result.exit_code == 0
    for option in [
        "--gpu",
        "--model",
        "--tp",
        "--port",
        "--seed",
        "--config",
        "--layer",
        "--ground-truth",
        "--max-queue",
    ]:
        assert option in result.output


@pytest.mark.integration
def test_realtime_runs_the_engine_loop_first_and_its_layer_proxy_ordinarily() -> None:
    if os.geteuid() != 0:
        pytest.skip("SCHED_FIFO needs root or CAP_SYS_NICE")
    with start_sim(["--realtime", "--layer"]) as sim:
        policy = os.sched_getscheduler(sim.pid)
        assert policy == os.SCHED_FIFO | os.SCHED_RESET_ON_FORK
        assert os.sched_getparam(sim.pid).sched_priority == 10
        children = psutil.Process(sim.pid).children()
        assert children, "the layer proxy runs as a child process"
        for child in children:  # started after the switch: not inherited
            assert os.sched_getscheduler(child.pid) == os.SCHED_OTHER
        assert request(sim.url, "/v1/models").status == 200


@pytest.mark.unit
def test_realtime_where_it_is_not_permitted_is_a_one_line_error(
        monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_args: object) -> None:
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "sched_setscheduler", refuse)
    result = CliRunner().invoke(sim_command, ["--realtime"])
    assert result.exit_code == 2
    assert result.output.strip() == ("zerohop: error: --realtime: not permitted here "
                                     "(Operation not permitted; needs root or CAP_SYS_NICE)")
