"""One error style for every command: `zerohop: error: ...` on one line, exit 2, no
traceback: click's own mistakes (an unknown option, a bad value, a folder that is not a
run) as much as zerohop's."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli_fork import ForkedZerohop

pytestmark = pytest.mark.integration


@pytest.mark.parametrize(("args", "words"), [
    (["run", "--bogus"], ["--bogus", "zerohop run --help"]),
    (["run", "--api", "grpc"], ["--api", "grpc"]),
    (["report", "{tmp}/none"], ["results folder not found"]),
    (["consolidate", "{tmp}"], ["not a zerohop results folder"]),
    (["sim", "--config", "{tmp}/none.yaml"], ["none.yaml"]),
    (["simulate", "--workload", "{tmp}/none.yaml"], ["no such file"]),
    (["microbench", "--only", "warp"], ["--only", "warp"]),
    (["nosuchcommand"], ["nosuchcommand"]),
])
def test_every_command_errs_in_one_style(args: list[str], words: list[str], tmp_path: Path,
                                         forked_zerohop: ForkedZerohop) -> None:
    """Each command run as a child process forked from one preloaded `zerohop`
    (tests/cli_fork.py): the same exit status and stderr, without the start-up each time."""
    res = forked_zerohop.run([a.format(tmp=tmp_path) for a in args], timeout=60)
    assert res.returncode == 2, (res.returncode, res.stdout[-500:], res.stderr[-1500:])
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("zerohop: error: "), res.stderr
    assert "Traceback" not in res.stderr + res.stdout
    for word in words:
        assert word in lines[0], lines[0]
