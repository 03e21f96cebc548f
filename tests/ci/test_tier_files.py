"""Each CI tier collects only the files that hold its tests (`.ci/tier_files.py`): a file
is a tier's when the tier's marker expression keeps one of its tests, exactly as
`pytest -m` would, so no tier loses a test by collecting less."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CI = ROOT / ".ci"


def _tier_files():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("tier_files", CI / "tier_files.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.unit
@pytest.mark.parametrize(("expression", "markers", "kept"), [
    ("unit and not slow", {"unit"}, True),
    ("unit and not slow", {"unit", "slow"}, False),
    ("integration and not alone and not vllm", {"integration"}, True),
    ("integration and not alone and not vllm", {"integration", "alone"}, False),
    ("slow and alone", {"slow", "alone", "integration"}, True),
    ("not unit and not integration", set(), True),
    ("(vllm or llamacpp) and not gpu", {"llamacpp"}, True),
])
def test_a_marker_expression_reads_as_pytest_reads_it(expression: str, markers: set[str],
                                                      kept: bool) -> None:
    assert _tier_files().selects(expression, markers) is kept


@pytest.mark.integration  # runs pytest's collection in a child process
def test_the_files_of_a_tier_hold_every_test_pytest_m_selects(tmp_path: Path) -> None:
    tiers = {"fidelity": "slow and alone", "ci-unit": "unit and not slow"}
    (tmp_path / "tiers.tsv").write_text("".join(f"{n}\t{e}\n" for n, e in tiers.items()))
    env = {"ZEROHOP_TIER_FILES": str(tmp_path), "PYTHONPATH": str(CI),
           "PATH": "/usr/bin:/bin"}
    folders = ["tests/ci", "tests/loadgen"]
    subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p",
                    "tier_files", "--collect-only", "-q", *folders], cwd=ROOT, env=env,
                   check=True, capture_output=True, timeout=120)
    for name, expression in tiers.items():
        listed = (tmp_path / f"{name}.files").read_text().split()
        selected = subprocess.run(
            [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--collect-only", "-q",
             "-m", expression, *folders], cwd=ROOT, capture_output=True, text=True,
            timeout=120).stdout
        files = sorted({line.split("::")[0] for line in selected.splitlines() if "::" in line})
        assert listed == files and files, (name, listed, files)
