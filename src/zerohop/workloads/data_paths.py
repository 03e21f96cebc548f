"""Variables a workload file may use in paths without the user setting them.

`${ZEROHOP_DATA}` is the installed package's own data folder (`zerohop/data`), so a
shipped workload can point at the trace slice that ships with it wherever the package
lives: a checkout, a wheel in a venv, pipx. The environment may still override it.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

DATA_VARIABLE = "ZEROHOP_DATA"


def package_data_dir() -> Path:
    """The folder holding zerohop's package data (a real directory: zerohop is never
    installed zipped)."""
    return Path(str(resources.files("zerohop") / "data"))


def builtin_path_variable(name: str) -> str | None:
    """The value of a built-in path variable, or None when `name` is not one."""
    if name == DATA_VARIABLE:
        return str(package_data_dir())
    return None
