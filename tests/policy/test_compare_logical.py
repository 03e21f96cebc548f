"""`zerohop compare` at the level of logical requests: results folders written through the
real sink from PolicyExecutor runs on scripted attempts (fake clock), compared and
rendered; the figures on the page are the ones worked out by hand below."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.policy.test_executor import Script, run
from zerohop.analysis.comparison.compare import compare_runs
from zerohop.core.records import RequestRecord
from zerohop.report.build import build_comparison
from zerohop.report.report_commands import compare_command
from zerohop.storage import run_folder as results
from zerohop.storage.run_reader import load_run

pytestmark = pytest.mark.unit

HOSTILE = "<b>tiny</b>"
Step = str | dict[str, object]  # one attempt's scripted outcome (see Script)
Steps = Sequence[tuple[Sequence[Step], float]]  # (attempts, ms per attempt) per logical request
OOM: dict[str, object] = {"outcome": "stream_error:out_of_memory", "error_type": "out_of_memory"}
NO_RETRY: dict[str, object] | None = None
FALLBACK: dict[str, object] = {
    "retry": {"max_attempts": 2, "outcomes": ["http_503"], "honour_retry_after": False,
              "backoff": {"initial_s": 0.05, "max_s": 0.05, "jitter": "none"}},
    "fallback": {"chain": ["medium", HOSTILE]},
}
BASELINE: Steps = [
    (["ok"], 10.0), (["ok"], 20.0), (["ok"], 30.0), (["http_503"], 40.0), (["ok"], 50.0),
]
CANDIDATE: Steps = [
    (["ok"], 10.0),  # large, 10 ms
    ([OOM, "ok"], 10.0),  # medium, 20 ms
    ([OOM, OOM, "ok"], 10.0),  # tiny, 30 ms
    (["http_503", "ok"], 10.0),  # large after a 50 ms wait: 70 ms
    ([OOM, OOM, OOM], 10.0),  # chain exhausted: 30 ms
    (["http_503", "http_503"], 10.0),  # max attempts: 70 ms
]


def write_policy_run(root: Path, name: str, policy: Mapping[str, object] | None,
                     logical: Steps, *,
                     with_logical_fields: bool = True) -> Path:
    """A results folder as a policy run leaves it: manifest, sink, requests.parquet."""
    run_dir = results.new_run_dir(root, name)
    results.start_manifest(run_dir, name=name, target={"kind": "embedded"}, workloads=[],
                           load={"mode": "open"}, slo={}, config={"policy": policy})
    sink = results.RecordSink(run_dir, "test")
    for i, (outcomes, cost_ms) in enumerate(logical):
        data = dict(policy) if policy is not None else None
        for record in run(data, Script(outcomes, cost_ms=cost_ms)):
            record.request_id = f"{name}-{i}-{record.attempt}"
            record.logical_request_id = f"{name}-{i}"
            record.sent_ts = 1_700_000_000.0 + i + record.attempt * 0.001
            if not with_logical_fields:
                _strip_logical(record)
            sink.add(record.to_row())
    sink.close()
    results.consolidate(run_dir)
    results.finish_manifest(run_dir, status="ok", end_reason="duration")
    return run_dir


def _strip_logical(record: RequestRecord) -> None:
    """What a run without the policy executor records: attempts only."""
    record.final_outcome = None
    record.logical_e2e_ms = record.logical_ttft_ms = None
    record.logical_attempts = None
    record.answered_by = record.give_up_reason = None


@pytest.fixture
def pair(tmp_path: Path) -> tuple[Path, Path]:
    return (write_policy_run(tmp_path, "no-retry", NO_RETRY, BASELINE),
            write_policy_run(tmp_path, "fallback", FALLBACK, CANDIDATE))


def test_logical_figures_and_deltas_against_the_baseline(pair: tuple[Path, Path]) -> None:
    base, candidate = (load_run(p) for p in pair)
    logical = compare_runs(base, candidate).logical
    assert logical is not None
    b, c = logical.base, logical.candidate
    assert (b.logical_requests, b.attempts, b.answered) == (5, 5, 4)
    assert (c.logical_requests, c.attempts, c.answered) == (6, 13, 4)
    amp = logical.amplification
    assert (amp.base, amp.candidate) == pytest.approx((1.0, 13 / 6))
    assert amp.delta == pytest.approx(13 / 6 - 1) and amp.verdict is None
    success = logical.success
    assert (success.base, success.candidate) == pytest.approx((80.0, 400 / 6))
    assert success.delta == pytest.approx(400 / 6 - 80.0)
    assert success.ci_low < success.delta < success.ci_high
    by_stat = {r.stat: r for r in logical.latency}
    assert list(by_stat) == ["p50", "p99"]
    # baseline e2e [10, 20, 30, 40, 50]: p50 30, p99 40 + 0.96 × 10
    # candidate e2e [10, 20, 30, 70, 30, 70] (retry waits included): p50 30, p99 70
    assert (by_stat["p50"].base, by_stat["p50"].candidate) == pytest.approx((30.0, 30.0))
    assert (by_stat["p99"].base, by_stat["p99"].candidate) == pytest.approx((49.6, 70.0))
    assert by_stat["p99"].delta_pct == pytest.approx(100 * 20.4 / 49.6)
    assert by_stat["p99"].base == pytest.approx(b.logical_e2e_p99_ms)  # summarise_policy's
    shares = {r.name: (r.base, r.candidate, r.delta) for r in logical.answered_share}
    assert shares == {
        "large": pytest.approx((100.0, 50.0, -50.0)),
        "medium": pytest.approx((0.0, 25.0, 25.0)),
        HOSTILE: pytest.approx((0.0, 25.0, 25.0)),
    }


def test_the_page_shows_the_logical_figures_escaped(pair: tuple[Path, Path],
                                                    tmp_path: Path) -> None:
    text = build_comparison(list(pair), tmp_path / "compare.html").read_text(encoding="utf-8")
    assert 'id="policy-runs"' in text and "Logical requests (client policy)" in text
    overview = text.split('id="policy-runs"')[1].split("</section>")[0]
    cells = [_cells(row) for row in overview.split("<tr>")[2:]]
    assert [c[1:7] for c in cells] == [
        ["5", "5", "1.00×", "80.0 %", "30.0", "49.6"],
        ["6", "13", "2.17× (+1.17×)", "66.7 % (-13.3 pp)", "30.0", "70.0 (+41.1 %)"],
    ]
    assert cells[1][8] == "large 50.0 %, medium 25.0 %, &lt;b&gt;tiny&lt;/b&gt; 25.0 %"
    block = text.split("Logical requests (client policy)")[1].split("</table>")[0]
    rows = {c[0]: c[1:4] for c in (_cells(r) for r in block.split("<tr>")[2:])}
    assert rows["amplification (attempts per logical request)"] == ["1.00×", "2.17×", "+1.17×"]
    assert rows["logical success rate"] == ["80.0 %", "66.7 %", "-13.3 pp"]
    assert rows["logical E2E p99"] == ["49.6 ms", "70.0 ms", "+20.4 ms (+41.1 %)"]
    assert rows["answered by &lt;b&gt;tiny&lt;/b&gt;"] == ["0.0 %", "25.0 %", "+25.0 pp"]
    assert HOSTILE not in text  # escaped wherever it appears
    assert "logical: amplification 1.00× → 2.17×" in text


def test_cli_prints_the_logical_line(pair: tuple[Path, Path], tmp_path: Path) -> None:
    result = CliRunner().invoke(
        compare_command, [*map(str, pair), "-o", str(tmp_path / "c.html"), "--boot", "200"]
    )
    assert result.exit_code == 0, result.output
    line = next(x for x in result.output.splitlines() if "logical:" in x)
    assert "amplification 1.00× → 2.17×" in line and "success 80.0 % → 66.7 %" in line
    assert "E2E p99 49.6 → 70.0 ms (+41.1 %" in line


def test_retries_that_pay_waits_are_judged_worse_at_p99(tmp_path: Path) -> None:
    """200 logical requests; the candidate retries the baseline's 503s after 200 ms:
    more of them are answered, and the ones that needed a retry set the p99."""
    rng = random.Random(5)
    costs = [rng.uniform(10.0, 20.0) for _ in range(200)]
    failing = set(rng.sample(range(200), 20))
    retry = {"retry": {"max_attempts": 2, "outcomes": ["http_503"],
                       "backoff": {"initial_s": 0.2, "max_s": 0.2, "jitter": "none"}}}
    base = write_policy_run(tmp_path, "base", NO_RETRY, [
        (["http_503"] if i in failing else ["ok"], cost) for i, cost in enumerate(costs)])
    cand = write_policy_run(tmp_path, "retry", retry, [
        (["http_503", "ok"] if i in failing else ["ok"], cost) for i, cost in enumerate(costs)])
    logical = compare_runs(load_run(base), load_run(cand)).logical
    assert logical is not None
    assert logical.amplification.candidate == pytest.approx(1.1)
    assert logical.success.verdict == "better"  # 90 % → 100 %
    p99 = next(r for r in logical.latency if r.stat == "p99")
    assert p99.verdict == "worse" and p99.ci_low > 0
    assert p99.candidate > 200.0 > p99.base


def test_runs_without_logical_records_have_no_section(tmp_path: Path) -> None:
    plain = [write_policy_run(tmp_path, name, NO_RETRY, BASELINE, with_logical_fields=False)
             for name in ("a", "b")]
    assert compare_runs(*(load_run(p) for p in plain)).logical is None
    text = build_comparison(plain, tmp_path / "plain.html").read_text(encoding="utf-8")
    assert 'id="policy-runs"' not in text and "Logical requests (client policy)" not in text
    mixed = compare_runs(load_run(plain[0]),
                         load_run(write_policy_run(tmp_path, "c", FALLBACK, CANDIDATE)))
    assert mixed.logical is None
    assert any("only one run has logical-request records" in n for n in mixed.notes)


def _cells(row_html: str) -> list[str]:
    """The text of each <td> of one table row (markup of badges and spans removed)."""
    import re

    cells = re.findall(r"<td[^>]*>(.*?)</td>", row_html, flags=re.S)
    return [" ".join(re.sub(r"<[^>]+>", " ", c).split()) for c in cells]
