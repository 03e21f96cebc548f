"""Click options generated from the one settings model (`loadgen.run_settings`): a flag
is declared there and nowhere else, so `zerohop run` and the commands that take some of
its settings (`selfcheck`, `sweep`, `simulate`) read the same name, type and choices,
and the same default and help unless the command says what differs for it."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import click

from zerohop.loadgen.run_settings import Flag, setting_fields

F = TypeVar("F", bound=Callable[..., Any])


def setting_options(names: Iterable[str] | None = None, *,
                    defaults: Mapping[str, Any] | None = None,
                    helps: Mapping[str, str] | None = None) -> Callable[[F], F]:
    """A decorator adding one click option per setting (all, or those in `names`), in
    the model's order; `defaults` and `helps` are a command's own, where they differ
    from `zerohop run`'s (a default given here is shown in the help)."""
    wanted = None if names is None else set(names)
    defaults, helps = dict(defaults or {}), dict(helps or {})
    unknown = (set(defaults) | set(helps) | (wanted or set())) - {n for n, _, _ in setting_fields()}
    if unknown:
        raise ValueError(f"no such setting: {', '.join(sorted(unknown))}")

    def decorate(command: F) -> F:
        for name, flag, default in reversed(setting_fields()):
            if wanted is None or name in wanted:
                own = dataclasses.replace(flag, help=helps.get(name, flag.help),
                                          show_default=flag.show_default or name in defaults)
                kwargs = _click_kwargs(own, defaults.get(name, default))
                command = click.option(flag.name, name, **kwargs)(command)
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
