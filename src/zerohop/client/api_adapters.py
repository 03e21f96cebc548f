"""Pick the adapter for an API name (the names are `core.apis.API_NAMES`)."""

from __future__ import annotations

from zerohop.client.anthropic_adapter import AnthropicMessagesAdapter
from zerohop.client.openai_adapters import OpenAIChatAdapter, OpenAICompletionsAdapter
from zerohop.client.protocols import ApiAdapter
from zerohop.client.responses_adapter import OpenAIResponsesAdapter
from zerohop.core.apis import api_spec

_ADAPTERS: dict[str, type[ApiAdapter]] = {
    adapter.name: adapter
    for adapter in (OpenAIChatAdapter, OpenAICompletionsAdapter, AnthropicMessagesAdapter,
                    OpenAIResponsesAdapter)
}


def create_api_adapter(name: str) -> ApiAdapter:
    """The adapter for an API name; unknown names list the valid ones."""
    return _ADAPTERS[api_spec(name).name]()  # api_spec: ValueError naming the valid APIs
