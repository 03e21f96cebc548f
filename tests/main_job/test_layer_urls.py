"""`--layer-url` values: `URL` (the arm `layer`) or `NAME=URL`, repeated; a bad one is a
ValueError that names it."""

from __future__ import annotations

import pytest

from zerohop.runner.compare_layer import parse_layer_urls

pytestmark = pytest.mark.unit


def test_named_and_bare_layer_urls() -> None:
    assert parse_layer_urls(["http://127.0.0.1:8080/"]) == {"layer": "http://127.0.0.1:8080"}
    assert parse_layer_urls(["vllm-router=http://a:1", "nginx=http://b:2"]) == {
        "vllm-router": "http://a:1", "nginx": "http://b:2"}
    assert parse_layer_urls([]) == {}


@pytest.mark.parametrize("values, word", [
    (["a=http://x:1", "a=http://y:2"], "twice"),
    (["http://x:1", "http://y:2"], "twice"),
    (["direct=http://x:1"], "direct"),
    (["control=http://x:1"], "control"),
    (["r=ftp://x:1"], "http"),
    (["bad name=http://x:1"], "bad name"),
])
def test_bad_layer_urls(values: list[str], word: str) -> None:
    with pytest.raises(ValueError, match=word):
        parse_layer_urls(values)
