"""The report's token-count section: the client's count beside the server's usage."""

from __future__ import annotations

from zerohop.analysis.latency.token_counts import INPUT_ERROR_FLAG_PCT, TokenCounts
from zerohop.report import formatting as fmt


def prompt_size_check(counts: TokenCounts | None) -> dict[str, str] | None:
    """The verdict's line on prompt sizes, asked against the server's count: a warning
    naming each workload whose median request misses the asked size by more than
    ±3 %, else how close they came; None when no request could be compared."""
    compared = [row for row in (counts.rows if counts else []) if row.input_compared]
    if not compared:
        return None
    if counts is not None and counts.flags:
        return {"status": "warn", "text": "prompt sizes off: " + "; ".join(counts.flags)}
    overall = compared[-1]  # the `all` row when there are several workloads
    text = (f"prompt sizes: median within ±{INPUT_ERROR_FLAG_PCT:g} % of the asked size, "
            f"{fmt.pct(overall.input_within_one * 100.0)} of requests within ±1 token")
    if overall.clamped:
        text += (f"; {fmt.count(overall.clamped)} asked a size the target cannot make "
                 "and were sent the nearest it can (prompt_clamped)")
    return {"status": "ok", "text": text}


def token_count_section(counts: TokenCounts) -> dict[str, object] | None:
    """The report's rows (strings as shown); None when no ok request was measured."""
    if not counts.rows:
        return None
    rows = []
    for row in counts.rows:
        differences = ", ".join(f"{d:+d}: {n}" for d, n in row.output_differences if d != 0)
        rows.append({
            "workload": row.workload,
            "output_compared": fmt.count(row.output_compared),
            "client_output": fmt.count(row.client_output),
            "server_output": fmt.count(row.server_output),
            "output_difference": f"{row.output_difference:+,d} "
                                 f"({fmt.signed_pct(row.output_difference_pct)})"
            if row.output_compared else fmt.DASH,
            "output_mismatched": fmt.count(row.output_mismatched) if row.output_compared
            else fmt.DASH,
            "output_differences": differences or fmt.DASH,
            "input_compared": fmt.count(row.input_compared),
            "asked_input": fmt.count(row.asked_input),
            "asked_text": fmt.count(row.asked_input - row.asked_image),
            "asked_image": fmt.count(row.asked_image),
            "server_input": fmt.count(row.server_input),
            "input_difference": fmt.signed_pct(row.input_difference_pct)
            if row.input_compared else fmt.DASH,
            "input_median": fmt.signed_pct(row.input_median_error_pct),
            "input_p95": fmt.pct(row.input_p95_abs_error_pct),
            "input_within_one": fmt.pct(row.input_within_one * 100.0),
            "sources": ", ".join(f"{s} {n}" for s, n in row.prompt_sources) or fmt.DASH,
            "clamped": fmt.count(row.clamped),
        })
    # a column for the images' asked tokens only when some workload sent images
    return {"rows": rows, "flags": counts.flags,
            "images": any(row.asked_image for row in counts.rows)}
