"""start_sim / start_proxy: ports chosen by the OS, health waited for, clear errors,
nothing left running."""

from __future__ import annotations

import os

import pytest

from zerohop.sim.launcher import SimStartError, start_sim

from .wire import request

pytestmark = pytest.mark.integration


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_start_and_stop_leave_nothing_behind() -> None:
    with start_sim() as a, start_sim() as b:
        assert a.port != b.port and a.url.startswith("http://127.0.0.1:")
        assert request(a.url, "/health").status == 200
        pids = (a.pid, b.pid)
    assert not any(alive(pid) for pid in pids)


def test_bad_arguments_raise_with_the_child_stderr() -> None:
    with pytest.raises(SimStartError, match="unknown gpu 'tpu-v9'"):
        start_sim(["--gpu", "tpu-v9"], startup_timeout_s=20)


def test_layer_flag_runs_the_proxy_in_its_own_process() -> None:
    with start_sim(["--layer", "--layer-per-request-ms", "5"]) as sim:
        body = {
            "model": "llama-3-8b",
            "prompt": "hi",
            "max_tokens": 3,
            "stream": True,
            "ignore_eos": True,
        }
        r = request(sim.url, "/v1/completions", body)
        assert r.status == 200 and r.complete
        assert r.headers["server-timing"].startswith("layer;dur=")
        pid = sim.pid
    assert not alive(pid)
