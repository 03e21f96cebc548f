"""Where the files a run needs lie, in a checkout and in an installed package alike.

The top-level folders loadtests/, workloads/ and report_templates/ are the packages
`zerohop.shipped.<folder>` (setup.py): a wheel carries them in site-packages/zerohop/
shipped/, an editable install maps the same names onto the checkout's folders. So
`importlib.resources` finds them wherever zerohop is installed, and no code has to guess
a path from where its own source file lies.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

LOADTESTS = "loadtests"
WORKLOADS = "workloads"
REPORT_TEMPLATES = "report_templates"


class ShippedFilesError(RuntimeError):
    """A shipped folder is missing: zerohop is installed incompletely (or zipped)."""


def folder(name: str) -> Path:
    """The folder on disk that holds the shipped package `name` (Locust and Jinja read
    paths, not resource handles)."""
    package = f"{__name__}.{name}"
    try:
        root = resources.files(package)
    except ModuleNotFoundError:
        raise ShippedFilesError(
            f"{package} is not installed: reinstall zerohop (pip install . or pip install -e .)"
        ) from None
    if not isinstance(root, Path) or not root.is_dir():
        raise ShippedFilesError(f"{package} is not a folder on disk ({root}): install zerohop "
                                "unzipped (pip install)")
    return root


def loadtests_dir() -> Path:
    """The locustfiles the CLI runs (`locust -f` takes the folder)."""
    return folder(LOADTESTS)


def workloads_dir() -> Path:
    """The default workload files, read when no --workload names a kind."""
    return folder(WORKLOADS)


def report_templates_dir() -> Path:
    """The report's Jinja templates and their static/ assets."""
    return folder(REPORT_TEMPLATES)


def locustfiles(kinds: list[str] | None = None) -> list[Path]:
    """The shipped locustfile of each workload kind (loadtests/<kind>.py), or the folder
    itself when no kind is named."""
    root = loadtests_dir()
    if not kinds:
        return [root]
    paths = [root / f"{kind}.py" for kind in kinds]
    missing = [p.name for p in paths if not p.is_file()]
    if missing:
        raise ShippedFilesError(f"no shipped locustfile {', '.join(missing)} in {root}")
    return paths
