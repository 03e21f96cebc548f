"""Which test files each CI tier runs, from one collection of the whole suite.

    python -m pytest --collect-only -q -p tier_files   (ZEROHOP_TIER_FILES=DIR, with
    DIR/tiers.tsv holding `NAME<TAB>MARKER-EXPRESSION` lines)

writes DIR/NAME.files: the files holding at least one test the tier's expression selects,
one a line. A tier then collects only those files (with its `-m` as before), instead of
importing all 2,400 tests to keep a few dozen: collection costs about 8 s a tier on a
2-core machine and CI runs ten tiers. A marker expression is `and`/`or`/`not`/parentheses
over marker names, so it is read as a Python boolean expression over the test's marker
names (a name the test lacks is false). Run as a plugin, after every conftest has added
its folder's markers.
"""

from __future__ import annotations

import os
from collections import defaultdict
from pathlib import Path

import pytest


def selects(expression: str, marker_names: set[str]) -> bool:
    """Whether `-m expression` keeps a test with these markers."""
    names: defaultdict[str, bool] = defaultdict(bool, dict.fromkeys(marker_names, True))
    return bool(eval(expression, {"__builtins__": {}}, names))  # CI's own expressions


def pytest_collection_finish(session: pytest.Session) -> None:
    out = os.environ.get("ZEROHOP_TIER_FILES")
    if not out:
        return
    folder = Path(out)
    tiers = [line.split("\t", 1) for line in (folder / "tiers.tsv").read_text().splitlines()
             if line.strip()]
    files: dict[str, set[str]] = {name: set() for name, _ in tiers}
    root = Path(str(session.config.rootpath))
    for item in session.items:
        markers = {mark.name for mark in item.iter_markers()}
        path = Path(str(item.path)).relative_to(root).as_posix()
        for name, expression in tiers:
            if selects(expression, markers):
                files[name].add(path)
    for name, paths in files.items():
        (folder / f"{name}.files").write_text("".join(f"{p}\n" for p in sorted(paths)))
