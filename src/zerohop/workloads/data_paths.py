"""Variables in the paths of a workload file: `${VAR}` and `${VAR:-default}`.

`${ZEROHOP_DATA}` is the installed package's own data folder (`zerohop/data`), so a
shipped workload can point at the trace slice that ships with it wherever the package
lives: a checkout, a wheel in a venv, pipx. The environment may still override it.
"""

from __future__ import annotations

import os
import re
from importlib import resources
from pathlib import Path

DATA_VARIABLE = "ZEROHOP_DATA"
_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def package_data_dir() -> Path:
    """The folder holding zerohop's package data (a real directory: zerohop is never
    installed zipped)."""
    return Path(str(resources.files("zerohop") / "data"))


def builtin_path_variable(name: str) -> str | None:
    """The value of a built-in path variable, or None when `name` is not one."""
    if name == DATA_VARIABLE:
        return str(package_data_dir())
    return None


def expand_path_variables(text: str) -> str:
    """`${VAR}` and `${VAR:-default}` (shell semantics: empty counts as unset with :-);
    `${ZEROHOP_DATA}` is the package's own data folder unless the environment sets it.
    ValueError names a variable that is unset and has no default."""

    def replace(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        value = os.environ.get(name) or builtin_path_variable(name)
        if value:
            return value
        if default is not None:
            return default
        raise ValueError(f"environment variable {name} is not set (or use ${{{name}:-default}})")

    return _VARIABLE.sub(replace, text)
