"""Issue 10 §6: the embedded target and the exporter bind loopback by default, and a
load test without --host refuses to start (exit 3, one line) when the embedded target
cannot start, instead of guessing a host."""

from __future__ import annotations

import subprocess
from pathlib import Path

import psutil
import pytest

from tests.reliability.conftest import locust_cmd, run, zerohop_cmd
from zerohop.sim.embedded import start_embedded_target

pytestmark = pytest.mark.integration


def _listening_addresses(pid: int) -> set[str]:
    procs = [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]
    return {c.laddr.ip for p in procs for c in p.net_connections(kind="inet")
            if c.status == psutil.CONN_LISTEN}


def test_embedded_target_listens_on_loopback_only() -> None:
    with start_embedded_target() as sim:
        assert sim.host == "127.0.0.1"
        assert _listening_addresses(sim.pid) == {"127.0.0.1"}


@pytest.mark.parametrize("make", [
    lambda r: locust_cmd("--headless", "-t", "3s", "--results-dir", str(r),
                         "--sim-args", "--gpu nonexistent"),
    lambda r: zerohop_cmd("run", "--duration", "3s", "--results-dir", str(r),
                          "--sim-args", "--gpu nonexistent"),
])
def test_no_host_and_no_embedded_target_refuses_to_start(make, tmp_path: Path  # type: ignore[no-untyped-def]
                                                         ) -> None:
    res: subprocess.CompletedProcess[str] = run(make(tmp_path / "r"), timeout=90)
    out = res.stdout + res.stderr
    assert res.returncode == 3, out[-2000:]
    assert "Traceback" not in out, out[-3000:]
    errors = [ln for ln in res.stderr.splitlines() if "error" in ln.lower()]
    assert len(errors) == 1 and "nonexistent" in errors[0], errors
    assert not (tmp_path / "r").exists() or not any((tmp_path / "r").iterdir())


def test_exporter_binds_loopback_by_default() -> None:
    from tests.telemetry.fakes import FakeNvml
    from zerohop.telemetry.exporter import NvmlExporter, exporter_command

    exporter = NvmlExporter(FakeNvml(), port=0)  # type: ignore[arg-type]
    try:
        assert exporter.server.server_address[0] == "127.0.0.1"
    finally:
        exporter.server.server_close()
    host_option = next(p for p in exporter_command.params if p.name == "host")
    assert host_option.default == "127.0.0.1"
