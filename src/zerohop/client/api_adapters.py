"""Make the client adapter an API's registry entry names (`core.apis.ApiEntry.adapter`).

The adapter module is imported on first use, so a run loads only its API's adapter.
A client resolves its adapter once, when it is made: nothing here is on the token path.
"""

from __future__ import annotations

from typing import cast

from zerohop.client.protocols import ApiAdapter
from zerohop.core.apis import api_entry, resolve_import_path


def create_api_adapter(name: str) -> ApiAdapter:
    """The adapter for an API name; unknown names list the valid ones."""
    entry = api_entry(name)  # ValueError naming the valid APIs
    adapter = cast("type[ApiAdapter]", resolve_import_path(entry.adapter))()
    if adapter.name != entry.name:
        raise ValueError(f"api: {entry.adapter} is the adapter of {adapter.name!r}, "
                         f"not of {entry.name!r}")
    return adapter
