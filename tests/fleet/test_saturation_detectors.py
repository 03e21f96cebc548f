"""zerohop's saturation detector against GuideLLM's published rule on planted cases on
the virtual clock, several seeds each: no false alarm in the controls, and the overloads
found sooner than the rule finds them (docs/saturation.md has the whole table)."""

from __future__ import annotations

import pytest

from tests.fleet.saturation_cases import Case, cases, delay, run_case

pytestmark = pytest.mark.unit
SEEDS = (0, 1, 2)  # capacity: the quick lower bound (the cases are far from it)
CASES = {case.name: case for case in cases(nightly_s=300.0)}


def _case(prefix: str) -> Case:
    return next(case for name, case in CASES.items() if name.startswith(prefix))


@pytest.mark.parametrize("prefix", ["overload from the start", "rising"])
def test_overloads_are_found_sooner_than_by_the_published_rule(prefix: str) -> None:
    case = _case(prefix)
    for seed in SEEDS:
        outcome = run_case(case, seed, precise=False)
        ours, theirs = delay(outcome, case, "zerohop"), delay(outcome, case, "guidellm")
        assert ours is not None and ours >= 0, (seed, outcome)  # never before the onset
        assert theirs is None or ours < theirs, (seed, outcome)


@pytest.mark.parametrize("prefix", ["80 %", "burst", "long contexts at 60 %",
                                    "long contexts at 85 %"])
def test_no_false_alarm_in_a_control(prefix: str) -> None:
    case = _case(prefix)
    for seed in SEEDS:
        outcome = run_case(case, seed, precise=False)
        assert outcome.zerohop_s is None, (seed, outcome)


def test_the_published_rule_alarms_on_long_answers_that_are_merely_streaming() -> None:
    """Its issue 606: no TTFT inside its window before the first answer ends, so the
    in-flight count's rise while the first answers stream is read as saturation."""
    outcome = run_case(_case("long contexts at 60 %"), 0, precise=False)
    assert outcome.guidellm_s is not None and outcome.guidellm_s < 60
    assert outcome.zerohop_s is None
