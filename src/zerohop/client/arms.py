"""Arms of an interleaved comparison: which base URL each request goes to.

Pricing a layer by running the workload twice (direct, then through the layer) lets a
server that drifts between the runs swamp the layer's cost. In one run whose requests
are each assigned at random to an arm (`direct`, `layer`, ...), drift falls on every
arm alike, and the difference between the arms is the layer's.

The assignment is blocked randomisation: every block of k consecutive assignments holds
each of the k arms once, in a seeded random order — exactly balanced at every point of
the run (a drift is shared out evenly, not just on average), still unpredictable to the
server, and the same sequence for the same seed. A key (a conversation's session id)
keeps all of its requests on the arm its first one drew, so a session's growing
history meets one path's caches.
"""

from __future__ import annotations

import random
import re
from collections import OrderedDict
from collections.abc import Sequence

ARM_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,40}$")
REMEMBERED_KEYS = 10_000


class ArmAssigner:
    """Seeded, balanced assignment of requests (or keyed sessions) to arms."""

    def __init__(self, arms: Sequence[str], seed: object) -> None:
        if not arms:
            raise ValueError("an interleaved run needs at least one arm")
        self.arms = tuple(arms)
        self._rng = random.Random(f"arms:{seed}")
        self._block: list[str] = []
        self._keyed: OrderedDict[str, str] = OrderedDict()

    def next_arm(self, key: str | None = None) -> str:
        """The arm of the next request; a request with a `key` seen before (a later turn
        of the same session) gets that key's arm."""
        if key is not None and key in self._keyed:
            self._keyed.move_to_end(key)
            return self._keyed[key]
        if not self._block:
            self._block = list(self.arms)
            self._rng.shuffle(self._block)
        arm = self._block.pop()
        if key is not None:
            self._keyed[key] = arm
            if len(self._keyed) > REMEMBERED_KEYS:
                self._keyed.popitem(last=False)
        return arm


def parse_arm_hosts(text: str) -> dict[str, str]:
    """`direct=http://A,layer=http://B` → {"direct": "http://A", "layer": "http://B"};
    a ValueError names the bad part."""
    arms: dict[str, str] = {}
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        name, sep, url = (s.strip() for s in part.partition("="))
        if not sep or not ARM_NAME.match(name):
            raise ValueError(f"--arm-hosts: {part!r} is not NAME=URL")
        if not re.match(r"^https?://[^/\s]+", url):
            raise ValueError(f"--arm-hosts: {url!r} (arm {name!r}) is not an http:// URL")
        if name in arms:
            raise ValueError(f"--arm-hosts: arm {name!r} given twice")
        arms[name] = url.rstrip("/")
    if not arms:
        raise ValueError("--arm-hosts: no arm given (expected NAME=URL,NAME=URL)")
    return arms


def format_arm_hosts(arms: dict[str, str]) -> str:
    """The `--arm-hosts` text for `arms` (what `parse_arm_hosts` reads back)."""
    return ",".join(f"{name}={url}" for name, url in arms.items())
