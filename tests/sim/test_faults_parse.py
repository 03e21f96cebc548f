"""Fault names and parameters: header parsing, validation, seeded probabilities."""

from __future__ import annotations

import pytest

from zerohop.sim.faults import FaultPlan, parse_fault_header, parse_fault_rule

pytestmark = pytest.mark.unit


def test_header_with_parameters() -> None:
    spec = parse_fault_header("stall_mid;after=5;s=0.5")
    assert spec.name == "stall_mid"
    assert spec.integer("after") == 5 and spec.number("s") == 0.5
    assert parse_fault_header("drop_mid").integer("after") == 3  # default


def test_http_faults() -> None:
    spec = parse_fault_header("http_429;retry_after=7")
    assert spec.status == 429 and spec.integer("retry_after") == 7 and not spec.no_body
    nobody = parse_fault_header("http_502_nobody")
    assert nobody.status == 502 and nobody.no_body


@pytest.mark.parametrize(
    ("header", "message"),
    [
        ("explode", "unknown fault 'explode'"),
        ("stall_mid;seconds=2", "has no parameter 'seconds'"),
        ("stall_mid;s=abc", "must be a number"),
        ("stall_mid;s", "must be key=value"),
        ("http_200", "4xx or 5xx"),
        ("drop_mid;after=-1", ">= 0"),
    ],
)
def test_bad_headers_say_what_is_wrong(header: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_fault_header(header)


def test_probabilities_are_seeded_per_request() -> None:
    plan = FaultPlan({"http_500": {"probability": 0.2}}, seed=3)
    draws = [plan.draw(f"req-{i}") for i in range(2000)]
    hits = sum(d is not None for d in draws)
    assert 320 < hits < 480
    again = FaultPlan({"http_500": {"probability": 0.2}}, seed=3)
    assert [again.draw(f"req-{i}") is not None for i in range(2000)] == [
        d is not None for d in draws
    ]
    other_seed = FaultPlan({"http_500": {"probability": 0.2}}, seed=4)
    assert [other_seed.draw(f"req-{i}") is not None for i in range(200)] != [
        d is not None for d in draws[:200]
    ]


def test_rule_validation_names_the_parameter() -> None:
    with pytest.raises(ValueError, match="bytes"):
        parse_fault_rule("oversized_chunk", {"bytes": "many"})
