"""Cold starts stay cheap: `zerohop run` reads its flags before it loads pandas (a
refused input, `--help` and the start of every run do not pay its ~0.5 s; the analysis,
after the run, loads it where it reads), and a Locust worker, which writes no Parquet,
imports the locustfiles without pyarrow."""

from __future__ import annotations

import subprocess
import sys

import pytest

HEAVY = ("pandas", "scipy")


@pytest.mark.integration  # a fresh interpreter: sys.modules here already holds pandas
def test_run_command_module_loads_no_pandas_or_scipy() -> None:
    probe = ("import sys, zerohop.cli.main_job; "
             f"print(' '.join(m for m in {HEAVY!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True, timeout=60)
    assert out.stdout.strip() == ""


@pytest.mark.integration  # a fresh interpreter, as Locust starts one per process
def test_locustfiles_load_no_pyarrow_pandas_or_scipy() -> None:
    from zerohop.shipped import loadtests_dir

    pattern = str(loadtests_dir() / "[!_]*.py")  # what Locust runs: not __init__.py
    probe = ("import glob, runpy, sys; "
             f"[runpy.run_path(p) for p in sorted(glob.glob({pattern!r}))]; "
             f"print(' '.join(m for m in {(*HEAVY, 'pyarrow')!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True, timeout=60)
    assert out.stdout.strip() == ""
