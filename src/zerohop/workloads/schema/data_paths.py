"""Variables in the paths of a workload file: `${VAR}` and `${VAR:-default}`.

`${ZEROHOP_DATA}` is the installed package's own data folder (`zerohop/data`), so a
shipped workload can point at the trace slice that ships with it wherever the package
lives: a checkout, a wheel in a venv, pipx. The environment may still override it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any

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


def resolve_input_path(value: Any, context: Any, *, what: str = "trace") -> Any:
    """A workload's input file as a final path: variables expanded (`${VAR:-default}`),
    `~` expanded, a relative path taken from the YAML file's folder (the validation
    context's `base_dir`). ValueError when the file is missing, unless the context says
    `check_files: False`. A value that is not a path is returned as it is, for the
    field's own validation to refuse (this runs before it)."""
    if not isinstance(value, str | Path):
        return value
    path = Path(expand_path_variables(str(value))).expanduser()
    options = context if isinstance(context, Mapping) else {}
    base_dir = options.get("base_dir")
    if not path.is_absolute() and base_dir is not None:
        path = Path(base_dir) / path
    path = path.resolve()
    if options.get("check_files", True) and not path.is_file():
        raise ValueError(f"{what} file not found: {path}")
    return path
