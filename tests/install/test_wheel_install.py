"""A new user's install: build the wheel, install it (with its dependencies, from the
package index) in a fresh venv outside the checkout, and run `zerohop run`, `report` and
`compare` from an empty folder. Proves the wheel carries every file a run needs and that
no code finds them through the checkout."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pyarrow.parquet as pq
import pytest

REPO = Path(__file__).resolve().parents[2]
# the shipped top-level folders and where the wheel puts them (setup.py), plus package data
SHIPPED = {"loadtests": "zerohop/shipped/loadtests", "workloads": "zerohop/shipped/workloads",
           "report_templates": "zerohop/shipped/report_templates",
           "src/zerohop/data": "zerohop/data"}
NOT_SOURCE = (".git", ".venv", "venv", "results", "build", "dist", "*.egg-info", "__pycache__",
              ".pytest_cache", ".mypy_cache", ".ruff_cache", ".hypothesis", ".benchmarks",
              ".cache", ".whl", "node_modules")


def shipped_files() -> set[str]:
    """Every file of the shipped folders, named as the wheel must hold it."""
    names = set()
    for folder, in_wheel in SHIPPED.items():
        for path in (REPO / folder).rglob("*"):
            if path.is_file() and "__pycache__" not in path.parts:
                names.add(f"{in_wheel}/{path.relative_to(REPO / folder).as_posix()}")
    return names


def step(args: list[str], *, cwd: Path, env: dict[str, str], timeout: float
         ) -> subprocess.CompletedProcess[str]:
    started = time.monotonic()
    res = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True,
                         timeout=timeout)
    print(f"{time.monotonic() - started:6.1f} s  {' '.join(args[:3])}")
    assert res.returncode == 0, (args, res.returncode, res.stdout[-2000:], res.stderr[-3000:])
    assert "Traceback" not in res.stdout + res.stderr, res.stderr[-3000:]
    return res


def user_env(venv: Path) -> dict[str, str]:
    """The environment of a user who has only the venv: nothing that points at the
    checkout (PYTHONPATH) or overrides a shipped folder (ZEROHOP_*)."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME") and not k.startswith("ZEROHOP_")}
    env["PATH"] = os.pathsep.join([str(venv / "bin"), env.get("PATH", "")])
    return env


@pytest.mark.integration  # builds, installs and runs zerohop in child processes
@pytest.mark.slow  # a wheel build, a dependency install and a 10 s run: about two minutes
@pytest.mark.timeout(900)
def test_wheel_installed_outside_the_checkout_runs_reports_and_compares(tmp_path: Path) -> None:
    # 1. build from a copy of the source: the checkout's build/ cannot leak stale files
    source = tmp_path / "source"
    shutil.copytree(REPO, source, ignore=shutil.ignore_patterns(*NOT_SOURCE))
    dist = tmp_path / "dist"
    here = tmp_path / "empty"
    here.mkdir()
    step([sys.executable, "-m", "pip", "wheel", str(source), "-w", str(dist), "--no-deps", "-q"],
         cwd=here, env=dict(os.environ), timeout=300)
    (wheel,) = dist.glob("zerohop-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        in_wheel = set(archive.namelist())
    missing = sorted(shipped_files() - in_wheel)
    assert not missing, f"the wheel lacks {missing}"

    # 2. a fresh venv outside the checkout; the wheel and its dependencies from the index
    venv = tmp_path / "venv"
    step([sys.executable, "-m", "venv", "--without-pip", str(venv)], cwd=here,
         env=dict(os.environ), timeout=120)
    python = venv / "bin" / "python"
    step([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-compile",
          str(wheel)], cwd=here, env=dict(os.environ), timeout=600)
    env = user_env(venv)
    where = step([str(python), "-c", "import sys, zerohop.shipped as s; "
                  "print(s.__file__); print(s.loadtests_dir()); print(s.workloads_dir()); "
                  "print(s.report_templates_dir()); print(*sys.path, sep='\\n')"],
                 cwd=here, env=env, timeout=60).stdout.splitlines()
    site_packages = venv / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" \
        / "site-packages"
    for line in where[:4]:
        assert Path(line).is_relative_to(site_packages), (line, site_packages)
    assert not [p for p in where[4:] if p and Path(p).resolve().is_relative_to(REPO)], where
    locustfile = step([str(venv / "bin" / "zerohop"), "locustfile"], cwd=here, env=env,
                      timeout=60).stdout.strip()
    assert Path(locustfile) == site_packages / "zerohop" / "shipped" / "loadtests"

    # 3. what a new user runs first, from an empty folder
    zerohop = str(venv / "bin" / "zerohop")
    step([zerohop, "run", "--duration", "10s"], cwd=here, env=env, timeout=300)
    (run_dir,) = [p for p in (here / "results").iterdir() if p.is_dir()]
    report = run_dir / "report.html"
    assert report.stat().st_size > 0
    requests = pq.read_table(run_dir / "requests.parquet")
    assert requests.num_rows > 0
    assert "ok" in set(requests.column("outcome").to_pylist())

    report.unlink()
    step([zerohop, "report", str(run_dir)], cwd=here, env=env, timeout=180)
    assert report.stat().st_size > 0
    step([zerohop, "compare", str(run_dir), str(run_dir)], cwd=here, env=env, timeout=180)
    assert (run_dir / "compare.html").stat().st_size > 0  # next to its data
