"""`zerohop run` reads its flags before it loads pandas: a refused input, `--help` and
the start of every run do not pay the ~0.5 s pandas costs to import (the analysis, after
the run, loads it where it reads)."""

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
