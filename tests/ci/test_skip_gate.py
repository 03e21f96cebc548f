"""CI cannot pass by skipping: `.ci/skip_gate.py` fails a tier on a skip nobody expected."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

CI = Path(__file__).resolve().parents[2] / ".ci"


def _gate():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("skip_gate", CI / "skip_gate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["skip_gate"] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.unit
def test_only_written_down_skips_pass(tmp_path: Path) -> None:
    gate = _gate()
    listed = tmp_path / "expected.txt"
    listed.write_text("# tier  node  reason\n"
                      "gpu  tests/microbench/test_on_real_gpu.py::*  no CUDA device\n")
    expected = gate.read_expected(listed)
    rows = [
        {"nodeid": "tests/a.py::test_ok", "outcome": "passed"},
        {"nodeid": "tests/microbench/test_on_real_gpu.py::test_launch", "outcome": "skipped",
         "reason": "no CUDA device here"},
    ]
    verdict = gate.judge("gpu", rows, expected)
    assert not verdict.unexpected and len(verdict.expected) == 1
    assert verdict.line("gpu").startswith("[gpu] passed 1 · failed 0 · skipped 1 (expected 1")
    # the same skip in another tier, or for another reason, was not expected
    assert gate.judge("unit", rows, expected).unexpected
    rows[1]["reason"] = "chromium not found"
    assert gate.judge("gpu", rows, expected).unexpected


@pytest.mark.unit
def test_a_malformed_expected_list_is_an_error(tmp_path: Path) -> None:
    gate = _gate()
    listed = tmp_path / "expected.txt"
    listed.write_text("gpu tests/x.py::*\n")
    with pytest.raises(ValueError, match=r"expected\.txt:1"):
        gate.read_expected(listed)


def _pytest_with_plugin(tmp_path: Path, *files: Path) -> Path:
    """Run pytest with the CI plugin on `files`; return the outcomes file it wrote."""
    outcomes = tmp_path / "outcomes.jsonl"
    env = {"ZEROHOP_OUTCOMES_FILE": str(outcomes), "PYTHONPATH": str(CI), "PATH": "/usr/bin"}
    subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider",
                    "-p", "outcomes_plugin", "-q", *map(str, files)],
                   cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    return outcomes


def _run_gate(tmp_path: Path, outcomes: Path, expected: str) -> subprocess.CompletedProcess[str]:
    listed = tmp_path / "expected.txt"
    listed.write_text(expected)
    return subprocess.run([sys.executable, str(CI / "skip_gate.py"), "unit", str(outcomes),
                           "--expected", str(listed)], capture_output=True, text=True,
                          timeout=60)


@pytest.mark.integration
def test_a_module_level_skip_and_a_collection_error_fail_the_tier(tmp_path: Path) -> None:
    """Skips that happen while collecting (a whole module skipped, a module-level importorskip)
    never reach the per-test hook; a module that fails to import runs none of its tests. The
    gate sees all three and fails the tier; a listed module skip passes it."""
    whole = tmp_path / "test_whole_module.py"
    whole.write_text("import pytest\n\npytest.skip('no widget board', allow_module_level=True)\n\n"
                     "def test_never():\n    assert False\n")
    optional = tmp_path / "test_optional_dep.py"
    optional.write_text("import pytest\n\npytest.importorskip('zerohop_no_such_module')\n\n"
                        "def test_never():\n    assert False\n")
    broken = tmp_path / "test_broken.py"
    broken.write_text("import zerohop_no_such_module_either\n\ndef test_never():\n    pass\n")
    fine = tmp_path / "test_fine.py"
    fine.write_text("def test_runs():\n    assert True\n")

    outcomes = _pytest_with_plugin(tmp_path, whole, optional, fine)
    refused = _run_gate(tmp_path, outcomes, "")
    assert refused.returncode == 1, refused.stdout
    assert "passed 1 · failed 0 · skipped 2 (expected 0, unexpected 2)" in refused.stdout
    assert "test_whole_module.py: no widget board" in refused.stdout
    assert "test_optional_dep.py: could not import 'zerohop_no_such_module'" in refused.stdout
    allowed = _run_gate(tmp_path, outcomes,
                        "unit  test_whole_module.py  ^no widget board$\n"
                        "unit  test_optional_dep.py  ^could not import 'zerohop_no_such_module'\n")
    assert allowed.returncode == 0, allowed.stdout

    outcomes = _pytest_with_plugin(tmp_path, broken, fine)
    refused = _run_gate(tmp_path, outcomes, "unit  *  .*\n")  # even with every skip allowed
    assert refused.returncode == 1, refused.stdout
    assert "collection errors 1" in refused.stdout
    assert "COLLECTION ERROR test_broken.py: " in refused.stdout
    assert "zerohop_no_such_module_either" in refused.stdout


@pytest.mark.integration
def test_a_planted_skip_fails_the_tier(tmp_path: Path) -> None:
    """A real pytest run with the CI plugin, one test that skips: the gate says so, exit 1;
    written down in the expected list, the same run passes."""
    planted = tmp_path / "test_planted.py"
    planted.write_text("import pytest\n\n"
                       "def test_runs():\n    assert True\n\n"
                       "def test_skips():\n    pytest.skip('the widget is absent')\n")
    outcomes = tmp_path / "outcomes.jsonl"
    env = {"ZEROHOP_OUTCOMES_FILE": str(outcomes), "PYTHONPATH": str(CI), "PATH": "/usr/bin"}
    run = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider",
                          "-p", "outcomes_plugin", "-q", str(planted)],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout[-2000:]  # pytest itself calls a skip a pass

    def gate(expected: str) -> subprocess.CompletedProcess[str]:
        listed = tmp_path / "expected.txt"
        listed.write_text(expected)
        return subprocess.run([sys.executable, str(CI / "skip_gate.py"), "unit", str(outcomes),
                               "--expected", str(listed)], capture_output=True, text=True,
                              timeout=60)

    refused = gate("")
    assert refused.returncode == 1
    assert "passed 1 · failed 0 · skipped 1 (expected 0, unexpected 1)" in refused.stdout
    assert "test_planted.py::test_skips: the widget is absent" in refused.stdout
    allowed = gate("unit  test_planted.py::test_skips  widget is absent\n")
    assert allowed.returncode == 0, allowed.stdout
