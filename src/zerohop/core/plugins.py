"""Plugins: modules from outside the tree that register kinds, APIs or report sections.

A plugin is an importable module whose import calls the registries' `register_*`
functions. It is named by `--plugin MODULE` or by an entry point of the group
`zerohop.plugins` in an installed distribution. Every process that does the work loads
the same ones before it reads a registry: the CLI (before its commands are built, so
`--only` and `--api` list a plugin's kind and API), the Locust master and workers
(`loadtests/plugin_kinds.py`) and the embedded target (`python -m zerohop.sim`). The
names given travel to those child processes in one environment variable,
`ZEROHOP_PLUGINS`, which the CLI sets; entry points are found in each process itself.
"""

from __future__ import annotations

import functools
import importlib
import os
from collections.abc import Callable, Iterable, Mapping, MutableMapping, Sequence
from importlib.metadata import entry_points

__all__ = ["ENTRY_POINT_GROUP", "PLUGINS_ENV", "PluginError", "load_plugins",
           "load_plugins_from_environment", "plugins_from_argv", "plugins_in_environment",
           "publish_plugins"]

ENTRY_POINT_GROUP = "zerohop.plugins"
PLUGINS_ENV = "ZEROHOP_PLUGINS"  # comma-separated module names, what --plugin named
PLUGIN_FLAG = "--plugin"

# what this process has imported already: a plugin's registrations run once per process
_LOADED: set[str] = set()


class PluginError(Exception):
    """A plugin that could not be loaded: the message is one line that names it."""


def load_plugins(names: Iterable[str] = ()) -> list[str]:
    """Import each module in `names`, then every entry point of `zerohop.plugins`, each
    once per process; the names newly loaded. A module that fails to import (missing, or
    raising while it registers) is a `PluginError` naming it and the first line of why."""
    loaded: list[str] = []
    for name in dict.fromkeys(n.strip() for n in names):
        if name and name not in _LOADED:
            _import(name, functools.partial(importlib.import_module, name))
            loaded.append(name)
    for point in entry_points(group=ENTRY_POINT_GROUP):
        key = f"{ENTRY_POINT_GROUP}:{point.name}={point.value}"
        if key not in _LOADED:
            _import(key, point.load, label=f"entry point {point.name!r} ({point.value})")
            loaded.append(point.value)
    return loaded


def _import(key: str, load: Callable[[], object], label: str | None = None) -> None:
    try:
        load()
    except Exception as exc:
        what = label or repr(key)
        reason = (str(exc).strip().splitlines() or [""])[0]
        raise PluginError(f"plugin {what} failed to load: {type(exc).__name__}"
                          + (f": {reason}" if reason else "")) from None
    _LOADED.add(key)


def plugins_in_environment(environ: Mapping[str, str] = os.environ) -> tuple[str, ...]:
    """The module names `ZEROHOP_PLUGINS` holds (what the CLI was given)."""
    text = environ.get(PLUGINS_ENV, "")
    return tuple(name.strip() for name in text.split(",") if name.strip())


def load_plugins_from_environment(environ: Mapping[str, str] = os.environ) -> list[str]:
    """What a child process calls first: the CLI's `--plugin` modules and the entry
    points."""
    return load_plugins(plugins_in_environment(environ))


def publish_plugins(names: Sequence[str],
                    environ: MutableMapping[str, str] = os.environ) -> tuple[str, ...]:
    """Add `names` to `ZEROHOP_PLUGINS` (after what it holds already), so every child
    process started from here loads them too; the names it holds now."""
    merged = tuple(dict.fromkeys([*plugins_in_environment(environ), *names]))
    if merged:
        environ[PLUGINS_ENV] = ",".join(merged)
    return merged


def plugins_from_argv(argv: Sequence[str]) -> tuple[str, ...]:
    """The `--plugin MODULE` / `--plugin=MODULE` values of a command line, read before
    the command is parsed (its choices depend on them); nothing after `--`."""
    found: list[str] = []
    args = list(argv)
    for i, arg in enumerate(args):
        if arg == "--":
            break
        if arg == PLUGIN_FLAG and i + 1 < len(args):
            found.append(args[i + 1])
        elif arg.startswith(PLUGIN_FLAG + "="):
            found.append(arg.split("=", 1)[1])
    return tuple(found)
