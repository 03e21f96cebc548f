"""Structured output's figures per workload: of the ok answers judged against a JSON
schema (the record's `structured_output`), how many parsed and how many followed it.

A workload that asked for no schema has no row; its cost against the same workload
without `response_format` is a comparison of two runs (`zerohop compare`), or of two
workloads of one run (README, "Structured output").
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from zerohop.core import records as rec

__all__ = ["StructuredShare", "structured_shares"]


@dataclass(frozen=True)
class StructuredShare:
    """One workload's judged answers: `valid` parsed and followed the schema,
    `invalid_json` did not parse, `schema_mismatch` parsed and broke it."""

    workload: str
    answers: int
    valid: int
    invalid_json: int
    schema_mismatch: int

    @property
    def parsed_share(self) -> float:
        return (self.answers - self.invalid_json) / self.answers

    @property
    def valid_share(self) -> float:
        return self.valid / self.answers


def structured_shares(requests: pd.DataFrame) -> list[StructuredShare]:
    """A row per workload with judged answers, in name order; none without any."""
    if "structured_output" not in requests.columns:
        return []
    judged = requests[requests["structured_output"].notna()]
    rows = []
    for workload, group in judged.groupby("workload", observed=True, sort=True):
        verdicts = group["structured_output"].astype(str)
        rows.append(StructuredShare(
            workload=str(workload), answers=len(group),
            valid=int((verdicts == rec.STRUCTURED_VALID).sum()),
            invalid_json=int((verdicts == rec.STRUCTURED_INVALID_JSON).sum()),
            schema_mismatch=int((verdicts == rec.STRUCTURED_SCHEMA_MISMATCH).sum()),
        ))
    return rows
