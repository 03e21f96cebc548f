"""`zerohop selfcheck` with no load named certifies the default run's short-query rate
(was: exit 2, "name the intended load")."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.main_job.test_run_command import zerohop
from zerohop.cli.selfcheck import default_rate

pytestmark = pytest.mark.integration


def test_selfcheck_without_a_load_runs_the_default_rate(tmp_path: Path) -> None:
    res = zerohop("selfcheck", "--duration", "5s", "--results-dir", str(tmp_path), timeout=180)
    assert res.returncode in (0, 1), (res.returncode, res.stdout[-1500:], res.stderr[-1500:])
    rate = default_rate()
    assert f"selfcheck at {rate:g} req/s" in res.stdout, res.stdout[-1500:]
    [run_dir] = [p for p in tmp_path.iterdir() if p.is_dir()]
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["load"]["mode"] == "open" and manifest["load"]["rate_rps"] == rate
