"""The official openai and anthropic SDKs talk to the sim without errors and see
correct usage."""

from __future__ import annotations

import json

import anthropic
import openai
import pytest

from zerohop.sim.answers.tokens import CHAT_MESSAGE_OVERHEAD, CHAT_REQUEST_OVERHEAD
from zerohop.sim.launcher import SimProcess

from .conftest import MODEL

pytestmark = pytest.mark.integration

PROMPT = "Explain continuous batching in one sentence, please."
PROMPT_TOKENS = 9  # Explain continuous batching in one sentence , please .
CHAT_PROMPT_TOKENS = CHAT_REQUEST_OVERHEAD + CHAT_MESSAGE_OVERHEAD + PROMPT_TOKENS


def oai(sim: SimProcess) -> openai.OpenAI:
    return openai.OpenAI(base_url=sim.url + "/v1", api_key="not-used", max_retries=0)


def claude(sim: SimProcess) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=sim.url, api_key="not-used", max_retries=0)


def test_models_list(sim: SimProcess) -> None:
    ids = [m.id for m in oai(sim).models.list()]
    assert ids == ["meta-llama/Meta-Llama-3-8B-Instruct"]


def test_chat_streaming_with_usage(sim: SimProcess) -> None:
    stream = oai(sim).chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": PROMPT}],
        max_tokens=12,
        stream=True,
        stream_options={"include_usage": True},
        extra_body={"ignore_eos": True},
    )
    chunks = list(stream)
    assert chunks[0].choices[0].delta.role == "assistant"
    contents = [
        c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content
    ]
    assert len(contents) == 12 and all(text.strip() for text in contents)
    finish = [
        c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason
    ]
    assert finish == ["length"]
    usage = chunks[-1].usage
    assert chunks[-1].choices == [] and usage is not None
    assert (usage.prompt_tokens, usage.completion_tokens) == (CHAT_PROMPT_TOKENS, 12)


def test_chat_non_streaming(sim: SimProcess) -> None:
    reply = oai(sim).chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": PROMPT}],
        max_tokens=7,
        extra_body={"ignore_eos": True},
    )
    assert reply.choices[0].finish_reason == "length"
    content = reply.choices[0].message.content
    assert content is not None and len(content.split()) == 7
    assert reply.usage is not None and reply.usage.completion_tokens == 7
    assert reply.usage.prompt_tokens == CHAT_PROMPT_TOKENS


def test_completions_text_and_token_ids(sim: SimProcess) -> None:
    client = oai(sim)
    stream = client.completions.create(
        model=MODEL,
        prompt=PROMPT,
        max_tokens=5,
        stream=True,
        stream_options={"include_usage": True},
        extra_body={"ignore_eos": True},
    )
    chunks = list(stream)
    texts = [c.choices[0].text for c in chunks if c.choices]
    assert len(texts) == 5
    assert chunks[-1].usage is not None and chunks[-1].usage.prompt_tokens == PROMPT_TOKENS
    reply = client.completions.create(
        model=MODEL, prompt=[101, 102, 103, 104], max_tokens=3, extra_body={"ignore_eos": True}
    )
    assert reply.usage is not None
    assert (reply.usage.prompt_tokens, reply.usage.completion_tokens) == (4, 3)


def test_without_ignore_eos_the_answer_may_stop_early(sim: SimProcess) -> None:
    reply = oai(sim).chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": PROMPT}],
        max_tokens=300,
    )
    assert reply.usage is not None
    n = reply.usage.completion_tokens
    assert 1 <= n <= 300
    expected = "length" if n == 300 else "stop"
    assert reply.choices[0].finish_reason == expected


def test_anthropic_messages_streaming(sim: SimProcess) -> None:
    with claude(sim).messages.stream(
        model=MODEL,
        max_tokens=9,
        messages=[{"role": "user", "content": PROMPT}],
        system="Be brief.",
        extra_body={"ignore_eos": True},
    ) as stream:
        texts = list(stream.text_stream)
        final = stream.get_final_message()
    assert len(texts) == 9
    assert final.stop_reason == "max_tokens"
    system_tokens = CHAT_MESSAGE_OVERHEAD + 3  # Be brief .
    assert final.usage.input_tokens == CHAT_PROMPT_TOKENS + system_tokens
    assert final.usage.output_tokens == 9


def test_anthropic_messages_non_streaming(sim: SimProcess) -> None:
    message = claude(sim).messages.create(
        model=MODEL,
        max_tokens=4,
        messages=[{"role": "user", "content": PROMPT}],
        extra_body={"ignore_eos": True},
    )
    assert message.type == "message" and message.role == "assistant"
    assert message.content[0].type == "text"
    assert len(message.content[0].text.split()) == 4
    assert message.usage.output_tokens == 4 and message.stop_reason == "max_tokens"


def test_typed_errors_reach_the_sdks(sim: SimProcess) -> None:
    with pytest.raises(openai.NotFoundError):
        oai(sim).chat.completions.create(
            model="no-such-model", messages=[{"role": "user", "content": "x"}]
        )
    with pytest.raises(openai.BadRequestError, match="maximum context length"):
        oai(sim).completions.create(model=MODEL, prompt="x", max_tokens=100_000)
    with pytest.raises(anthropic.BadRequestError):
        claude(sim).messages.create(
            model=MODEL, max_tokens=9000, messages=[{"role": "user", "content": "x"}]
        )
    with pytest.raises(anthropic.RateLimitError):
        claude(sim).messages.create(
            model=MODEL,
            max_tokens=5,
            messages=[{"role": "user", "content": "x"}],
            extra_headers={"x-zerohop-fault": "http_429"},
        )


def test_in_stream_error_surfaces_in_the_openai_sdk(sim: SimProcess) -> None:
    stream = oai(sim).chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": "x"}],
        max_tokens=10,
        stream=True,
        extra_headers={"x-zerohop-fault": "stream_error;after=2;type=out_of_memory"},
    )
    with pytest.raises(openai.APIError, match="injected stream error"):
        for _ in stream:
            pass


def test_responses_streaming_with_usage(sim: SimProcess) -> None:
    stream = oai(sim).responses.create(
        model=MODEL, input=[{"role": "user", "content": PROMPT}], max_output_tokens=12,
        stream=True, extra_body={"ignore_eos": True},
    )
    events = list(stream)
    kinds = [e.type for e in events]
    assert kinds[:4] == ["response.created", "response.in_progress",
                         "response.output_item.added", "response.content_part.added"]
    assert kinds[-1] == "response.completed"
    assert [e.sequence_number for e in events] == list(range(len(events)))
    deltas = [e.delta for e in events if e.type == "response.output_text.delta"]
    assert len(deltas) == 12 and all(text.strip() for text in deltas)
    final = events[-1].response
    assert final.status == "incomplete" and final.incomplete_details is not None
    assert final.incomplete_details.reason == "max_output_tokens"
    assert final.output_text == "".join(deltas)
    assert final.usage is not None
    assert (final.usage.input_tokens, final.usage.output_tokens) == (CHAT_PROMPT_TOKENS, 12)


def test_responses_function_call_and_non_streaming(sim: SimProcess) -> None:
    tool = {"type": "function", "name": "search",
            "parameters": {"type": "object", "properties": {"query": {"type": "string"}}}}
    events = list(oai(sim).responses.create(
        model=MODEL, input=PROMPT, max_output_tokens=20, stream=True, tools=[tool],
        tool_choice="required",
    ))
    fragments = [e.delta for e in events if e.type == "response.function_call_arguments.delta"]
    (call,) = [item for item in events[-1].response.output if item.type == "function_call"]
    assert call.name == "search" and call.arguments == "".join(fragments)
    assert set(json.loads(call.arguments)) == {"query"}
    reply = oai(sim).responses.create(model=MODEL, input=PROMPT, max_output_tokens=7,
                                      extra_body={"ignore_eos": True})
    assert reply.usage is not None and reply.usage.output_tokens == 7
    assert len(reply.output_text.split()) == 7
