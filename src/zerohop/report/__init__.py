"""The HTML report and run comparison: pages laid out from what `zerohop.analysis`
computed (the analysis itself, pure functions over DataFrames, lives there).

`build_report(run_dir)` and `build_comparison(run_dirs, out)` are the entry points.
They are imported on first use, so `zerohop --help` does not pay for pandas/scipy.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from zerohop.report.build import build_comparison, build_report, compare_dirs

__all__ = ["build_comparison", "build_report", "compare_dirs"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        return getattr(importlib.import_module("zerohop.report.build"), name)
    raise AttributeError(f"module 'zerohop.report' has no attribute {name!r}")
