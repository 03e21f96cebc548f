"""The report's "Client policy" section (retries, fallbacks): what `analysis.policy`
measured, as rows and a chart."""

from __future__ import annotations

from typing import Any

from zerohop.analysis.latency.policy import PolicySummary
from zerohop.report.charts import Chart, Series
from zerohop.report.formatting import ms as fmt_ms


def policy_section(summary: PolicySummary | None) -> tuple[dict[str, Any] | None, list[Chart]]:
    """The report's "Client policy" section: template context and charts (None: hide)."""
    if summary is None:
        return None, []
    x, y = summary.amplification_series
    charts = []
    if x.size:
        charts.append(Chart(
            chart_id="policy-amplification", title="Amplification over time", kind="time",
            x=x, series=[Series("attempts per logical request", y, style="step")],
            x_label="s since start", y_label="attempts ÷ new requests",
        ))
    context = {
        "rows": [
            ("logical requests", f"{summary.logical_requests:,}"),
            ("attempts", f"{summary.attempts:,}"),
            ("amplification", f"{summary.amplification:.2f}×"),
            ("logical success rate", f"{summary.success_rate:.1%}"),
            ("logical E2E p50 / p99", f"{fmt_ms(summary.logical_e2e_p50_ms)} / "
                                      f"{fmt_ms(summary.logical_e2e_p99_ms)}"),
            ("answered E2E p99", fmt_ms(summary.answered_e2e_p99_ms)),
            ("answered TTFT p99", fmt_ms(summary.logical_ttft_p99_ms)),
            ("output tokens answered / wasted", f"{summary.output_tokens_answered:,} / "
                                                f"{summary.output_tokens_wasted:,}"),
        ],
        "answered_by": [(m, f"{s:.1%}") for m, s in summary.answered_share.items()],
        "give_up": list(summary.give_up.items()),
        "attempts_by_model": list(summary.attempts_by_model.items()),
        "attempts_by_reason": list(summary.attempts_by_reason.items()),
        "chart": charts[0].chart_id if charts else None,
    }
    return context, charts
