"""The `policy:` section is validated like every workload field: the error names the
field path, and `zerohop run` exits 2 on it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from zerohop.workloads.errors import WorkloadError
from zerohop.workloads.yaml_io import parse_workloads

pytestmark = pytest.mark.unit

WORKLOADS = Path(__file__).resolve().parents[2] / "workloads"


def _flood(policy: Any) -> dict[str, Any]:
    return {"kind": "short_query_flood", "name": "f", "policy": policy}


@pytest.mark.parametrize(
    ("policy", "path", "needle"),
    [
        ({"retry": {"max_attempts": 0}}, "policy.retry.max_attempts", "must be >= 1"),
        ({"retry": {"outcomes": ["http_5xx"]}}, "policy.retry.outcomes", "no outcome pattern"),
        ({"retry": {"outcomes": ["ok"]}}, "policy.retry.outcomes", "never retried"),
        ({"retry": {"backoff": {"jitter": "decorrelated"}}}, "policy.retry.backoff.jitter",
         "must be one of"),
        ({"retry": {"backoff": {"initial_s": 5, "max_s": 1}}}, "policy.retry.backoff",
         "max_s (1.0) must be >= initial_s"),
        ({"retry": {"max_in_flight": 0}}, "policy.retry.max_in_flight", "must be > 0"),
        ({"timeouts": {"first_token_s": 50, "total_s": 10}}, "policy.timeouts",
         "first_token_s (50.0) must be <= total_s"),
        ({"timeouts": {"stall_s": -1}}, "policy.timeouts.stall_s", "must be > 0"),
        ({"fallback": {"chain": []}}, "policy.fallback.chain", "at least 1"),
        ({"fallback": {"chain": [{"model": "m", "input_fraction": 1.5}]}},
         "policy.fallback.chain[0].input_fraction", "must be <= 1"),
        ({"fallback": {"chain": ["m"], "on": ["x"]}}, "policy.fallback.on", "unknown field"),
        ({"continuation": {"max_continuations": 0}},
         "policy.continuation.max_continuations", "must be >= 1"),
        ({"retries": 3}, "policy.retries", "unknown field"),
    ],
)
def test_policy_errors_name_the_field(policy: Any, path: str, needle: str) -> None:
    with pytest.raises(WorkloadError) as err:
        parse_workloads(_flood(policy), source="p.yaml")
    message = str(err.value)
    assert message.startswith(f"p.yaml: {path}: "), message
    assert needle in message


def test_valid_policy_with_shorthands() -> None:
    spec = parse_workloads(_flood({
        "retry": {"outcomes": ["http_5*", "timeout_*", "memory_error"]},
        "fallback": {"chain": ["medium", {"model": "small", "max_tokens": 8}]},
    })).workloads[0]
    assert spec.policy.fallback.chain[0].model == "medium"
    assert spec.policy.retry.backoff.jitter == "full"  # the safe default
    assert spec.policy.fallback.outcomes == ["memory_error"]


def test_shipped_policy_workloads_load() -> None:
    files = sorted(WORKLOADS.glob("policies_*.yaml"))
    assert len(files) == 4
    from zerohop.workloads.yaml_io import load_workload_file

    for path in files:
        assert load_workload_file(path).workloads[0].policy is not None


def test_zerohop_run_exits_2_on_a_bad_policy(tmp_path: Path) -> None:
    from zerohop.cli import cli

    bad = tmp_path / "bad.yaml"
    bad.write_text("kind: short_query_flood\nname: b\npolicy:\n  retry: {max_attempts: -1}\n")
    result = CliRunner().invoke(cli, ["run", "--workload", str(bad), "--duration", "1"])
    assert result.exit_code == 2
    assert "policy.retry.max_attempts" in result.output
