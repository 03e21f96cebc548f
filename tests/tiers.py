"""What the conftests of the tiers that need an outside tool share.

A folder's tests all belong to its tier (`mark_folder`), and a test whose tool is
missing skips, naming what is missing, unless the tier's ZEROHOP_REQUIRE_* variable is
1 (CI sets it where it installed the tool): then it fails, so a missing tool never
passes as skipped (`skip_unless_required`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import NoReturn

import pytest

__all__ = ["mark_folder", "skip_unless_required"]


def skip_unless_required(require_env: str, message: str) -> NoReturn:
    """Skip with `message`, or fail with it when `require_env` is 1."""
    if os.environ.get(require_env) == "1":
        pytest.fail(f"{require_env}=1 but {message}", pytrace=False)
    pytest.skip(message)


def mark_folder(items: list[pytest.Item], folder: Path, *marks: pytest.MarkDecorator) -> None:
    """Give every collected test under `folder` each of `marks`."""
    for item in items:
        if folder in Path(str(item.path)).resolve().parents:
            for mark in marks:
                item.add_marker(mark)
