"""Images on the wire: each API's image part before the text of the last user message,
the record's `images` and `image_tokens`, and Completions refusing them."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from zerohop.client.api_adapters import create_api_adapter
from zerohop.client.llm_client import RequestSpec, spec_record
from zerohop.client.protocols import GenerationRequest
from zerohop.core.images import EncodedImage
from zerohop.workloads.schema.image_spec import ImageSource, ImageSpec

pytestmark = pytest.mark.unit


def _images(count: int = 2) -> tuple[EncodedImage, ...]:
    spec = ImageSpec.model_validate({"count": count, "width": 60, "height": 30})
    return ImageSource(spec, np.random.default_rng(5)).next_images()


def _body(api: str, req: GenerationRequest) -> dict[str, Any]:
    built = create_api_adapter(api).build_request(req, api_key=None, request_id="r")
    body: dict[str, Any] = json.loads(built.body)
    return body


def _history(images: tuple[EncodedImage, ...]) -> GenerationRequest:
    return GenerationRequest(model="m", max_tokens=4, images=images, messages=[
        {"role": "user", "content": "first question"},
        {"role": "assistant", "content": "an answer"},
        {"role": "user", "content": "what is in the picture?"}])


def test_chat_sends_image_url_parts_before_the_text_of_the_last_user_message() -> None:
    images = _images()
    messages = _body("openai-chat", _history(images))["messages"]
    assert messages[:2] == [{"role": "user", "content": "first question"},
                            {"role": "assistant", "content": "an answer"}]
    assert messages[2] == {"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{images[0].data_b64}"}},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{images[1].data_b64}"}},
        {"type": "text", "text": "what is in the picture?"}]}


def test_responses_sends_input_image_parts() -> None:
    images = _images(1)
    items = _body("openai-responses", _history(images))["input"]
    assert items[-1] == {"role": "user", "content": [
        {"type": "input_image", "image_url": images[0].data_url},
        {"type": "input_text", "text": "what is in the picture?"}]}
    assert items[0] == {"role": "user", "content": "first question"}


def test_anthropic_sends_base64_image_blocks() -> None:
    images = _images(1)
    req = _history(images)
    req.system = "be brief"
    body = _body("anthropic", req)
    assert body["system"] == "be brief"
    assert body["messages"][-1] == {"role": "user", "content": [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                     "data": images[0].data_b64}},
        {"type": "text", "text": "what is in the picture?"}]}


def test_a_single_prompt_carries_its_images_and_no_images_change_nothing() -> None:
    images = _images(1)
    with_images = GenerationRequest(model="m", max_tokens=4, prompt="hi", images=images)
    (message,) = _body("openai-chat", with_images)["messages"]
    assert [part["type"] for part in message["content"]] == ["image_url", "text"]
    plain = GenerationRequest(model="m", max_tokens=4, prompt="hi")
    assert _body("openai-chat", plain)["messages"] == [{"role": "user", "content": "hi"}]


def test_completions_takes_no_images() -> None:
    req = GenerationRequest(model="m", max_tokens=4, prompt="hi", images=_images(1))
    with pytest.raises(ValueError, match="images: openai-completions takes text only"):
        _body("openai-completions", req)


def test_the_record_carries_the_count_and_the_asked_tokens() -> None:
    images = _images(2)
    spec = RequestSpec(workload="w", generation=GenerationRequest(
        model="m", max_tokens=4, prompt="hi", images=images), target_input_tokens=20)
    record = spec_record(spec, "r1", "openai-chat")
    assert record.images == 2 and record.image_tokens == 2 * (3 * 2)  # 60×30: 3·2 patches
    plain = spec_record(RequestSpec(workload="w", generation=GenerationRequest(
        model="m", max_tokens=4, prompt="hi")), "r2", "openai-chat")
    assert plain.images is None and plain.image_tokens is None


def test_anthropic_tool_results_stay_first_in_their_message() -> None:
    images = _images(1)
    req = GenerationRequest(model="m", max_tokens=4, images=images, messages=[
        {"role": "user", "content": "look it up"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "search",
                                                          "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "found"}])
    last = _body("anthropic", req)["messages"][-1]
    assert [block["type"] for block in last["content"]] == ["tool_result", "image"]
