"""The plugins' workload kinds: this file loads the plugins `zerohop run` names (through
`ZEROHOP_PLUGINS`) and the `zerohop.plugins` entry points, in the Locust master and in
each worker, before anything reads a registry; then it binds a user class, made from
its entry (a `SessionUser` for a kind of sessions), for every registered kind that has no
locustfile of its own in this folder, so a plugin's kind runs under `zerohop run` with no
locustfile of its own."""

import sys
from pathlib import Path

from locust import events

from zerohop.core.exit_codes import EXIT_BAD_INPUT
from zerohop.core.plugins import PluginError, load_plugins_from_environment

try:
    load_plugins_from_environment()
except PluginError as exc:
    print(f"zerohop: error: {exc}", file=sys.stderr, flush=True)
    sys.exit(EXIT_BAD_INPUT)

from zerohop.loadgen.hooks import install
from zerohop.loadgen.sessions import SessionUser
from zerohop.loadgen.users import LLMUser, user_class_for
from zerohop.workloads.kind_registry import workload_kinds

install(events)

_HERE = Path(__file__).parent
for _kind in workload_kinds():
    if not (_HERE / f"{_kind.name}.py").is_file():
        # Locust finds user classes among a locustfile's names: bind each under its own
        _base = SessionUser if _kind.sessions else LLMUser
        globals()[_kind.user_class] = user_class_for(_kind.name, _base)
