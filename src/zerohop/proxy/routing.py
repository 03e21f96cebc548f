"""Which upstream (engine replica) the layer forwards each request to.

Three policies, as gateways in front of several replicas offer them:

* `round_robin` — each upstream in turn, whatever it is doing;
* `least_loaded` — the upstream with the fewest requests in flight *at this layer* (the
  queue depth the layer can see without asking the engines; ties go round in turn);
* `prefix_affinity` — the upstream that holds the longest cached prefix of the prompt,
  as the layer can know it: the prompt (model, then each message's role and content)
  is cut into fixed-size blocks of characters and each block's hash is chained to the
  one before it, so one hash names one whole prefix. The layer remembers which upstream
  it sent each chain to (a bounded LRU table) and picks the upstream of the longest
  chain it remembers; a prompt it has no block of goes to the least loaded. Only whole
  blocks count, as an engine's prefix cache keeps whole KV blocks.

The layer's view is an estimate: an engine may have evicted what the table remembers,
and requests another client sent straight to a replica are not in the table.
"""

from __future__ import annotations

import hashlib
import itertools
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

ROUTES: tuple[str, ...] = ("round_robin", "least_loaded", "prefix_affinity")
BLOCK_CHARS = 256  # ~64 tokens of English text per block
MAX_BLOCKS = 256  # the first 64k characters decide; a longer prompt shares them
TABLE_ENTRIES = 200_000


class UpstreamLoad:
    """Requests in flight to each upstream, as this layer counts them."""

    def __init__(self, count: int) -> None:
        self.in_flight = [0] * count

    def started(self, index: int) -> None:
        self.in_flight[index] += 1

    def finished(self, index: int) -> None:
        self.in_flight[index] -= 1


class Router:
    """Base: `choose` names the upstream of one request (its parsed JSON body, or None
    when the layer does not parse)."""

    name = ""

    def __init__(self, load: UpstreamLoad) -> None:
        self.load = load
        self.count = len(load.in_flight)

    def choose(self, payload: dict[str, Any] | None) -> int:
        raise NotImplementedError


class RoundRobin(Router):
    name = "round_robin"

    def __init__(self, load: UpstreamLoad) -> None:
        super().__init__(load)
        self._turn = itertools.cycle(range(self.count))

    def choose(self, payload: dict[str, Any] | None) -> int:
        return next(self._turn)


class LeastLoaded(Router):
    name = "least_loaded"

    def __init__(self, load: UpstreamLoad) -> None:
        super().__init__(load)
        self._start = 0

    def choose(self, payload: dict[str, Any] | None) -> int:
        return self.least_loaded()

    def least_loaded(self) -> int:
        """The idlest upstream; among equals, the next in turn (so an idle layer still
        spreads its requests instead of sending all of them to the first)."""
        counts = self.load.in_flight
        order = [(self._start + i) % self.count for i in range(self.count)]
        best = min(order, key=lambda i: counts[i])
        self._start = (best + 1) % self.count
        return best


class PrefixAffinity(LeastLoaded):
    name = "prefix_affinity"

    def __init__(self, load: UpstreamLoad, *, block_chars: int = BLOCK_CHARS,
                 table_entries: int = TABLE_ENTRIES) -> None:
        super().__init__(load)
        self.block_chars = block_chars
        self.table_entries = table_entries
        self._table: OrderedDict[bytes, int] = OrderedDict()
        self.matched_blocks = 0  # of the last choice: how many blocks it found

    def choose(self, payload: dict[str, Any] | None) -> int:
        chain = block_chain(prompt_text(payload), self.block_chars)
        best, self.matched_blocks = None, 0
        for depth, key in enumerate(chain, start=1):
            if key in self._table:
                best, self.matched_blocks = self._table[key], depth
        chosen = best if best is not None else self.least_loaded()
        self.remember(chain, chosen)  # the chosen upstream now holds every block of it
        return chosen

    def remember(self, chain: Sequence[bytes], index: int) -> None:
        """Upstream `index` holds the prefixes `chain` names (the oldest entries go
        when the table is full)."""
        for key in chain:
            self._table[key] = index
            self._table.move_to_end(key)
        while len(self._table) > self.table_entries:
            self._table.popitem(last=False)

    @property
    def remembered(self) -> int:
        return len(self._table)


def make_router(route: str, upstreams: int) -> Router:
    load = UpstreamLoad(upstreams)
    routers: dict[str, type[Router]] = {
        "round_robin": RoundRobin, "least_loaded": LeastLoaded,
        "prefix_affinity": PrefixAffinity,
    }
    if route not in routers:
        raise ValueError(f"route: {route!r} unknown; choose one of {', '.join(ROUTES)}")
    return routers[route](load)


def block_chain(text: str, block_chars: int = BLOCK_CHARS) -> list[bytes]:
    """Chained hashes of the whole `block_chars`-character blocks of `text`: entry i
    names blocks 0..i together (at most MAX_BLOCKS)."""
    chain: list[bytes] = []
    previous = b""
    whole = min(len(text) // block_chars, MAX_BLOCKS)
    for i in range(whole):
        block = text[i * block_chars:(i + 1) * block_chars].encode("utf-8", "surrogatepass")
        previous = hashlib.blake2b(previous + block, digest_size=16).digest()
        chain.append(previous)
    return chain


def prompt_text(payload: dict[str, Any] | None) -> str:
    """The prompt as one string, in the order an engine tokenises it: the model, then
    the system prompt and each message's role and content (chat, Anthropic), or the
    prompt (completions; token ids as their decimal text). "" when there is none."""
    if not isinstance(payload, dict):
        return ""
    parts = [str(payload.get("model", "")), "\x1e"]
    system = payload.get("system")
    if system is not None:
        parts += ["system\x1f", _content_text(system), "\x1e"]
    messages = payload.get("messages")
    if isinstance(messages, list):
        for message in messages:
            if isinstance(message, dict):
                parts += [str(message.get("role", "")), "\x1f",
                          _content_text(message.get("content")), "\x1e"]
    prompt = payload.get("prompt")
    if prompt is not None:
        parts.append(_content_text(prompt))
    return "".join(parts)


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        pieces = []
        for item in content:
            if isinstance(item, dict):
                pieces.append(str(item.get("text", "")))
            else:
                pieces.append(str(item) + " ")
        return "".join(pieces)
    return "" if content is None else str(content)
