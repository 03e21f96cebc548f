"""The embedded target as the suite starts it when the user names no host."""

from __future__ import annotations

from collections.abc import Sequence
from importlib import resources
from typing import Any

EMBEDDED_TARGET_CONFIG = resources.files("zerohop") / "data" / "embedded_target.yaml"


def start_embedded_target(extra_args: Sequence[str] = (), **kwargs: Any) -> Any:
    """Start `zerohop sim` with the suite's default config (LoRA adapters, 128k context)
    in its own process on a free loopback port; the caller stops it."""
    from zerohop.sim.launcher import start_sim

    args = list(extra_args)
    if "--config" not in args:
        args = ["--config", str(EMBEDDED_TARGET_CONFIG), *args]
    return start_sim(args, **kwargs)


def start_embedded_replicas(count: int, extra_args: Sequence[str] = (), **kwargs: Any
                            ) -> list[Any]:
    """`count` embedded targets, each an engine replica in its own process (separate
    processes let several cores carry the streams; one process's event loop is one
    core). Started one after another; if one fails, those already up are stopped."""
    replicas: list[Any] = []
    try:
        for _ in range(count):
            replicas.append(start_embedded_target(extra_args, **kwargs))
    except BaseException:
        for replica in replicas:
            replica.stop()
        raise
    return replicas
