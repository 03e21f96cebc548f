"""`zerohop run`'s click options, generated from the one settings model
(`loadgen.run_settings.RunSettings`): a flag is declared there and nowhere else."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from zerohop.loadgen.run_settings import Flag, setting_fields

F = TypeVar("F", bound=Callable[..., Any])


def run_options(command: F) -> F:
    """`command` with one click option per setting, in the model's order."""
    for name, flag, default in reversed(setting_fields()):
        command = click.option(flag.name, name, **_click_kwargs(flag, default))(command)
    return command


def _click_kwargs(flag: Flag, default: Any) -> dict[str, Any]:
    kwargs: dict[str, Any] = {"help": flag.help or None, "show_default": flag.show_default or None}
    if flag.kind is bool:
        return {**kwargs, "is_flag": True, "default": default}
    if flag.choices:
        kwargs["type"] = click.Choice(flag.choices)
    elif flag.kind is Path:
        kwargs["type"] = click.Path(path_type=Path)
    elif flag.kind is not str:
        kwargs["type"] = flag.kind
    if flag.repeatable:
        return {**kwargs, "multiple": True}
    return {**kwargs, "default": default}
