"""CI's skip gate: a tier passes only if every test it skipped was expected to skip.

    python .ci/skip_gate.py TIER OUTCOMES.jsonl [--expected .ci/expected-skips.txt]

Prints `[TIER] passed N · failed N · skipped N (expected N, unexpected N)` and each
unexpected skip with its reason; exits 1 when there is one, or when a module could not be
collected (an `error` row: none of its tests ran, whatever pytest's exit code says). The
expected list has one entry a line, `TIER  NODEID-GLOB  REASON-REGEX` (whitespace-separated;
the regex is the rest of the line and must match the skip's reason). A test that skips for a
reason nobody wrote down has not run, and CI must not read that as a pass.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import re
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class ExpectedSkip:
    tier: str
    nodeid_glob: str
    reason: re.Pattern[str]

    def matches(self, tier: str, nodeid: str, reason: str) -> bool:
        return (self.tier in (tier, "*") and fnmatch.fnmatchcase(nodeid, self.nodeid_glob)
                and self.reason.search(reason) is not None)


@dataclass(frozen=True)
class Verdict:
    counts: Counter[str]
    expected: list[tuple[str, str]]
    unexpected: list[tuple[str, str]]
    collection_errors: list[tuple[str, str]]

    @property
    def failed(self) -> bool:
        return bool(self.unexpected or self.collection_errors)

    def line(self, tier: str) -> str:
        c = self.counts
        return (f"[{tier}] passed {c['passed']} · failed {c['failed']} · skipped {c['skipped']}"
                f" (expected {len(self.expected)}, unexpected {len(self.unexpected)})"
                + (f" · xfailed {c['xfailed']}" if c["xfailed"] else "")
                + (f" · collection errors {c['error']}" if c["error"] else ""))


def read_expected(path: Path) -> list[ExpectedSkip]:
    entries = []
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split(None, 2)
        if len(parts) != 3:
            raise ValueError(f"{path}:{number}: expected 'TIER NODEID-GLOB REASON-REGEX'")
        entries.append(ExpectedSkip(parts[0], parts[1], re.compile(parts[2])))
    return entries


def judge(tier: str, outcomes: list[dict[str, str]], expected: list[ExpectedSkip]) -> Verdict:
    counts: Counter[str] = Counter(row["outcome"] for row in outcomes)
    hit, missed = [], []
    for row in outcomes:
        if row["outcome"] != "skipped":
            continue
        item = (row["nodeid"], row.get("reason", ""))
        known = any(e.matches(tier, *item) for e in expected)
        (hit if known else missed).append(item)
    errors = [(row["nodeid"], row.get("reason", "")) for row in outcomes
              if row["outcome"] == "error"]
    return Verdict(counts, hit, missed, errors)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("tier")
    ap.add_argument("outcomes", type=Path)
    ap.add_argument("--expected", type=Path,
                    default=Path(__file__).with_name("expected-skips.txt"))
    args = ap.parse_args(argv)
    rows = []
    if args.outcomes.exists():  # absent: pytest collected nothing (exit 5)
        rows = [json.loads(line) for line in args.outcomes.read_text().splitlines() if line]
    try:
        expected = read_expected(args.expected)
    except (OSError, ValueError, re.error) as exc:
        print(f"skip gate: {exc}", file=sys.stderr)
        return 2
    verdict = judge(args.tier, rows, expected)
    print(verdict.line(args.tier))
    for nodeid, reason in verdict.unexpected:
        print(f"  UNEXPECTED SKIP {nodeid}: {reason}")
    for nodeid, reason in verdict.collection_errors:
        print(f"  COLLECTION ERROR {nodeid}: {reason}")
    return 1 if verdict.failed else 0


if __name__ == "__main__":
    sys.exit(main())
