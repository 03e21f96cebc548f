"""Speculative decoding end to end: `zerohop run` against the embedded target with a
modelled draft, telemetry scraping its /metrics, then analysis/latency/spec_decode.py and the
report's section.

The bound on the acceptance rate is the draws' own sampling error, not a tolerance:
a draft of K tokens accepts A of them, P(A > i) = P^(i+1), so over the N drafts
counted the mean of A has standard error sqrt(Var A / N), with Var A = E[A^2] - E[A]^2
and E[A^2] = sum over positions i, j of P^(max(i, j) + 1); each position's count is
Binomial(N, P^(i+1)). Both are checked within 4 standard errors."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from tests.reliability.conftest import FLOOD_WORKLOAD, only_run_dir, run, zerohop_cmd
from zerohop.analysis.latency.spec_decode import SpecDecodeSummary, summarise_spec_decode
from zerohop.analysis.measured_window import measured_window
from zerohop.report import formatting as fmt
from zerohop.report.build import build_report
from zerohop.storage.run_reader import load_run

pytestmark = pytest.mark.integration

K, P = 4, 0.7
SIGMAS = 4.0


def _run(tmp_path: Path, sim_args: str | None) -> tuple[SpecDecodeSummary | None, str]:
    wl = tmp_path / "flood.yaml"
    wl.write_text(FLOOD_WORKLOAD.format(max_tokens=64, users=4))
    extra = ["--sim-args", sim_args] if sim_args else []
    res = run(zerohop_cmd(
        "run", "--duration", "6s", "--workload", str(wl), "--only", "ShortQueryFlood",
        "--telemetry", "prom", "--microbench", "off", "--no-report",
        "--results-dir", str(tmp_path / "r"), *extra), timeout=180)
    assert res.returncode == 0, (res.stdout + res.stderr)[-3000:]
    run_dir = only_run_dir(tmp_path / "r")
    data = load_run(run_dir)
    return summarise_spec_decode(data, measured_window(data)), build_report(run_dir).read_text()


def test_acceptance_rate_and_tokens_per_read_with_a_modelled_draft(tmp_path: Path) -> None:
    s, page = _run(tmp_path, f"--spec-draft-tokens {K} --spec-acceptance {P}")
    assert s is not None
    n = s.drafts
    assert n > 200 and s.draft_tokens == K * n
    per_pos = [P ** (i + 1) for i in range(K)]
    mean = sum(per_pos)
    second = sum(P ** (max(i, j) + 1) for i in range(K) for j in range(K))
    stderr = math.sqrt((second - mean**2) / n)
    assert abs(s.accepted_per_draft - mean) <= SIGMAS * stderr, (s, mean, stderr)
    assert abs(s.acceptance_rate - mean / K) <= SIGMAS * stderr / K
    assert len(s.per_position) == K
    for share, p in zip(s.per_position, per_pos, strict=True):
        assert abs(share - p) <= SIGMAS * math.sqrt(p * (1 - p) / n), (s.per_position, per_pos)
    # accepted drafts reach the client in the step's read: more than one token per read
    assert s.requests > 20
    assert s.tokens_per_read_mean > 1.0 and s.tokens_per_read_pooled > 1.0
    # the report's section says the same
    section = page[page.index('<section id="spec-decode">'):]
    section = section[:section.index("</section>")]
    assert f"{fmt.pct(100 * s.acceptance_rate)} of draft tokens accepted" in section
    assert f"{fmt.number(s.accepted_per_draft)} accepted tokens per draft" in section
    assert section.count('<td class="num">') == K


def test_no_summary_without_speculative_decoding(tmp_path: Path) -> None:
    summary, page = _run(tmp_path, None)
    assert summary is None and 'id="spec-decode"' not in page
