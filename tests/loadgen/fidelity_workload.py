"""The closed-loop flood that the client-fidelity test and its bench both measure, so the
bench's figures stay comparable with what the test asserts."""

from __future__ import annotations

FIDELITY_WORKLOAD = """
kind: short_query_flood
name: fidelity
input_tokens: 64
max_tokens: {tokens}
ignore_eos: true
load: {{kind: closed, users: {users}}}
"""


def fidelity_workload(tokens: int, users: int) -> str:
    """The workload YAML for `users` closed-loop streams of `tokens` tokens each."""
    return FIDELITY_WORKLOAD.format(tokens=tokens, users=users)
