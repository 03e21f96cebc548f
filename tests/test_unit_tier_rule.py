"""The `unit` tier's rule (tests/conftest.py) catches a unit test that starts a process or
opens a socket, however it does so, and lets an event loop's own socketpair through.

Planted tests run in a child pytest, once with the rule's plugin and once without: every
planted test passes without it, so each failure with it is the rule's doing.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.conftest import RULE

pytestmark = pytest.mark.integration  # runs pytest in a child process

REPO = Path(__file__).resolve().parents[1]

PLANTED = textwrap.dedent('''
    import asyncio
    import multiprocessing
    import os
    import socket
    import subprocess
    import sys
    from subprocess import Popen

    import pytest
    import uvloop

    pytestmark = pytest.mark.unit


    def test_binds_a_tcp_socket():
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))


    def test_swallows_the_refusal():
        try:
            socket.socket(socket.AF_INET6, socket.SOCK_STREAM).close()
        except Exception:
            pass


    def test_binds_a_unix_socket(tmp_path):
        with socket.socket(socket.AF_UNIX) as s:
            s.bind(str(tmp_path / "s"))


    def test_runs_a_subprocess():
        subprocess.run([sys.executable, "-c", "pass"], check=True)


    def test_popen_imported_by_name():
        Popen([sys.executable, "-c", "pass"]).wait()


    def test_forks():
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)


    def test_starts_a_spawned_process():
        process = multiprocessing.get_context("spawn").Process(target=os.getpid)
        process.start()
        process.join(60)
        assert process.exitcode == 0


    def test_serves_on_uvloop():
        async def serve():
            server = await asyncio.get_running_loop().create_server(
                asyncio.Protocol, "127.0.0.1", 0)
            server.close()

        uvloop.run(serve())


    @pytest.fixture
    def bound_socket():
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            yield s


    def test_uses_a_fixture_that_binds(bound_socket):
        pass


    def test_event_loops_and_socketpairs_are_allowed():
        asyncio.run(asyncio.sleep(0))
        uvloop.run(asyncio.sleep(0))
        a, b = socket.socketpair()
        with a, b:
            a.sendall(b"x")
            assert b.recv(1) == b"x"


    @pytest.mark.integration
    def test_marked_both_is_held_to_the_unit_rule():
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
''')

PLANTED_INTEGRATION = textwrap.dedent('''
    import socket
    import subprocess
    import sys

    import pytest

    pytestmark = pytest.mark.integration


    def test_integration_tests_may_bind_and_run_processes():
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
        subprocess.run([sys.executable, "-c", "pass"], check=True)
''')

PLANTED_MIXED = textwrap.dedent('''
    import socket

    import pytest


    @pytest.fixture(scope="module")
    def server():
        yield
        with socket.socket() as s:  # its teardown talks to the network
            s.bind(("127.0.0.1", 0))


    @pytest.mark.integration
    def test_integration_uses_a_module_server(server):
        pass


    @pytest.mark.unit
    def test_unit_last_in_the_module_is_not_blamed_for_its_teardown():
        pass
''')

# planted test → what the refusal names
REFUSED = {
    "test_binds_a_tcp_socket": "socket.socket(AF_INET)",
    "test_swallows_the_refusal": "socket.socket(AF_INET6)",
    "test_binds_a_unix_socket": "socket.bind",
    "test_runs_a_subprocess": "subprocess.Popen",
    "test_popen_imported_by_name": "subprocess.Popen",
    "test_forks": "os.fork",
    "test_starts_a_spawned_process": "multiprocessing Process.start",
    "test_serves_on_uvloop": "uvloop Loop.create_server",
    "test_uses_a_fixture_that_binds": "socket.socket(AF_INET)",
    "test_marked_both_is_held_to_the_unit_rule": "socket.socket(AF_INET)",
}
ALLOWED = {
    "test_event_loops_and_socketpairs_are_allowed",
    "test_integration_tests_may_bind_and_run_processes",
    "test_integration_uses_a_module_server",
    "test_unit_last_in_the_module_is_not_blamed_for_its_teardown",
}


def _run_planted(tmp_path: Path, *plugin: str) -> dict[str, str]:
    """Run the planted tests in a child pytest: test name → "passed" or its failure text."""
    (tmp_path / "pytest.ini").write_text(
        "[pytest]\nmarkers =\n    unit: pure\n    integration: processes, sockets\n")
    (tmp_path / "test_planted.py").write_text(PLANTED)
    (tmp_path / "test_planted_integration.py").write_text(PLANTED_INTEGRATION)
    (tmp_path / "test_planted_mixed.py").write_text(PLANTED_MIXED)
    report = tmp_path / "report.xml"
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *plugin, "-q",
         f"--junitxml={report}", "test_planted.py", "test_planted_integration.py",
         "test_planted_mixed.py"],
        cwd=tmp_path, env={**os.environ, "PYTHONPATH": path}, capture_output=True, text=True,
        timeout=300, check=False)
    assert report.is_file(), done.stdout[-3000:] + done.stderr[-3000:]
    results: dict[str, str] = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        problems = [el for el in case if el.tag in ("failure", "error")]
        text = " ".join((el.get("message") or "") + (el.text or "") for el in problems)
        # a test whose fixture was refused also has a (passing) call report: keep failures
        name = case.get("name", "")
        results[name] = text if problems else results.get(name, "passed")
    return results


def test_every_planted_test_passes_without_the_rule(tmp_path: Path) -> None:
    results = _run_planted(tmp_path)
    assert results == {name: "passed" for name in [*REFUSED, *ALLOWED]}, results


def test_the_rule_refuses_each_process_and_socket_by_name(tmp_path: Path) -> None:
    results = _run_planted(tmp_path, "-p", "tests.conftest")
    assert set(results) == set(REFUSED) | ALLOWED, results
    for name in ALLOWED:
        assert results[name] == "passed", (name, results[name])
    for name, what in REFUSED.items():
        assert RULE in results[name], (name, results[name])
        assert what in results[name], (name, what, results[name])
