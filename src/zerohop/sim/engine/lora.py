"""LoRA adapter residency: `max_loras` GPU slots, least-recently-used eviction.

A request for an adapter that is not resident needs a slot: a free one, or the least
recently used adapter that no running sequence is using. Loading costs `load_ms`
(charged to the step that first runs the adapter). An adapter that cannot get a slot
keeps its requests waiting, as vLLM does.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable


class LoraSlots:
    def __init__(self, adapters: Iterable[str], max_loras: int) -> None:
        self.known = set(adapters)
        self.max_loras = max_loras
        self._resident: OrderedDict[str, None] = OrderedDict()  # LRU order, oldest first
        self.loads = 0

    def resident(self) -> list[str]:
        return list(self._resident)

    def acquire(self, adapter: str, in_use: set[str]) -> bool | None:
        """Make `adapter` resident. True: it had to be loaded (cold); False: it was
        warm; None: no slot can be freed now (every resident adapter is in use)."""
        if adapter in self._resident:
            self._resident.move_to_end(adapter)
            return False
        if len(self._resident) >= self.max_loras:
            victim = next((a for a in self._resident if a not in in_use), None)
            if victim is None:
                return None
            del self._resident[victim]
        self._resident[adapter] = None
        self.loads += 1
        return True

    def touch(self, adapter: str) -> None:
        if adapter in self._resident:
            self._resident.move_to_end(adapter)
