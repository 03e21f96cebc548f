"""The wire test's judgement (tests/wire_ttft.py): what a witnessed core stall excuses,
and what it never does."""

from __future__ import annotations

import numpy as np
import pytest

from tests.wire_ttft import in_witnessed_stall, judge

pytestmark = pytest.mark.unit

MS = 1_000_000


def test_a_late_first_token_is_set_aside_only_when_a_stall_covers_its_wait() -> None:
    sent = np.array([100 * MS, 200 * MS, 300 * MS, 400 * MS], dtype=np.int64)
    ttft = np.array([44.0, 44.0, 4.0, 4.0])
    diffs = np.array([40.0, 40.0, 0.05, -40.0])  # late, late, on time, early
    stalls = np.array([(110 * MS, 150 * MS), (250 * MS, 260 * MS), (290 * MS, 310 * MS),
                       (390 * MS, 450 * MS)])
    hit = in_witnessed_stall(sent, ttft, diffs, stalls)
    # the first waited through a stall; the second waited while the core was free (its
    # own doing); the third is on time whatever the core did; an early stamp is not late
    assert hit.tolist() == [True, False, False, False]


def test_no_stall_sets_nothing_aside() -> None:
    hit = in_witnessed_stall(np.array([MS], dtype=np.int64), np.array([44.0]),
                             np.array([40.0]), np.empty((0, 2), dtype=np.int64))
    assert not hit.any()


def test_the_bound_is_the_claim_plus_the_floor_of_the_same_run() -> None:
    floor = np.full(100, 0.02)
    assert judge("ok", np.full(100, 0.1), floor).holds
    late = judge("late", np.r_[np.full(97, 0.1), np.full(3, 40.0)], floor, set_aside=1)
    assert not late.holds and late.set_aside == 1
