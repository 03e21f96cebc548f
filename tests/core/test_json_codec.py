"""The per-request JSON codec reads what Python's `json` reads and writes strict JSON."""

from __future__ import annotations

import json
import math

import pytest

from zerohop.core import json_codec

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("text", [
    '{"a":1,"b":[1.5,null,true],"c":"é\\u00e9"}',
    '{"x":NaN,"y":Infinity}',  # not strict JSON, but servers send it and json reads it
    "[]",
])
def test_loads_reads_what_the_standard_library_reads(text: str) -> None:
    got, want = json_codec.loads(text), json.loads(text)
    assert json.dumps(got) == json.dumps(want)  # NaN-safe equality
    assert json_codec.loads(text.encode()) == got or math.isnan(got.get("x", 0))


def test_an_integer_past_64_bits_reads_as_a_number_of_its_size() -> None:
    big = json_codec.loads('{"n":123456789012345678901234567890}')["n"]
    assert big == pytest.approx(1.2345e29, rel=1e-3)


@pytest.mark.parametrize("text", ['{"a":', "data", '{"a":1}}', "\ud800"])
def test_loads_refuses_what_the_standard_library_refuses(text: str) -> None:
    with pytest.raises(ValueError):
        json_codec.loads(text)


def test_dumps_is_compact_utf8_with_null_for_nan() -> None:
    out = json_codec.dumps({"a": [1, 2.5], "s": "é", "n": float("nan")})
    assert out == '{"a":[1,2.5],"s":"é","n":null}'.encode()
    assert json.loads(out) == {"a": [1, 2.5], "s": "é", "n": None}
