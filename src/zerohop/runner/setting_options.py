"""Click options generated from the one settings model (`loadgen.run_settings`): a flag
is declared there and nowhere else, so `zerohop run` and `zerohop sweep` (which takes
the layer comparison's flags) read the same name, help and type."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

import click

from zerohop.loadgen.run_settings import Flag, setting_fields

F = TypeVar("F", bound=Callable[..., Any])


def setting_options(names: Iterable[str] | None = None) -> Callable[[F], F]:
    """A decorator adding one click option per setting (all, or those in `names`), in
    the model's order."""
    wanted = None if names is None else set(names)

    def decorate(command: F) -> F:
        for name, flag, default in reversed(setting_fields()):
            if wanted is None or name in wanted:
                command = click.option(flag.name, name, **_click_kwargs(flag, default))(command)
        return command

    return decorate


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
