from __future__ import annotations

import pytest

from zerohop.report.environment import environment_rows, flatten, redact

pytestmark = pytest.mark.unit


def test_secrets_are_redacted_by_key_by_value_and_in_urls() -> None:
    config = {
        "api_key": "abc",
        "OPENAI_API_KEY": "abc",
        "headers": {"Authorization": "Bearer xyz", "x-api-key": "k"},
        "hf_token": "hf_abcdefghijklmnop",
        "endpoint": "https://user:pa55@gateway.example/v1",
        "fallback": "sk-abcdefghijklmnop",
        "max_tokens": 256,
        "input_tokens": [1, 2],
        "tokenizer": "llama",
        "nested": [{"password": "p"}],
    }
    safe = redact(config)
    assert safe["api_key"] == safe["OPENAI_API_KEY"] == "***"
    assert safe["headers"] == {"Authorization": "***", "x-api-key": "***"}
    assert safe["hf_token"] == "***"
    assert safe["endpoint"] == "https://***@gateway.example/v1"
    assert safe["fallback"] == "***"
    assert safe["max_tokens"] == 256 and safe["input_tokens"] == [1, 2]
    assert safe["tokenizer"] == "llama"
    assert safe["nested"] == [{"password": "***"}]
    assert config["api_key"] == "abc"  # the input is not modified


def test_flatten_gives_dotted_rows() -> None:
    rows = flatten({"a": {"b": 1, "c": [1, 2]}, "d": [{"e": None}], "f": True})
    assert rows == [("a.b", "1"), ("a.c", "1, 2"), ("d[0].e", "—"), ("f", "true")]


def test_environment_rows_hold_no_secret() -> None:
    manifest = {"run_id": "r", "config": {"token": "secret-value"}, "host": {"hostname": "h"}}
    text = repr(environment_rows(manifest))
    assert "secret-value" not in text and "***" in text
