"""The client's own token counts beside the server's usage: the billing-versus-monitoring
drift operators chase.

Output: the client counts what the stream delivered (content events × tokens per event,
`counted_output_tokens`); the server says `usage.completion_tokens` (`output_tokens` with
`token_source = usage`). Input: the client asked for `target_input_tokens` of text and,
with images, `image_tokens` more; the server says `usage.prompt_tokens` (`input_tokens`).
Only `ok` requests are compared: a cut stream's counts differ for a reason already
reported. Pure: a frame in, figures out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from zerohop.analysis.latency.summary import ALL_WORKLOADS
from zerohop.analysis.run_data import category_codes

__all__ = ["INPUT_ERROR_FLAG_PCT", "TokenCountRow", "TokenCounts", "summarise_token_counts"]

INPUT_ERROR_FLAG_PCT = 3.0
"""The prompt-size promise: the median request within ±3 % of the asked size."""
_TOP_DIFFERENCES = 6


@dataclass(frozen=True)
class TokenCountRow:
    workload: str
    ok: int
    output_compared: int  # ok requests with both the server's and the client's count
    client_output: int
    server_output: int
    output_mismatched: int  # of those, requests whose two counts differ
    output_differences: tuple[tuple[int, int], ...]  # (server − client, requests), commonest
    input_compared: int  # ok requests with an asked size and the server's prompt count
    asked_input: int  # text and images
    asked_image: int  # of that, images (0: the workload sent none)
    server_input: int
    input_median_error_pct: float  # per request (server − asked) ÷ asked, median
    input_p95_abs_error_pct: float
    input_within_one: float  # share of requests within ±1 token of the asked size
    prompt_sources: tuple[tuple[str, int], ...]  # prompt_token_source → requests
    clamped: int  # ok requests whose asked size the target cannot make (`prompt_clamped`)

    @property
    def output_difference(self) -> int:
        return self.server_output - self.client_output

    @property
    def output_difference_pct(self) -> float:
        return _pct(self.output_difference, self.client_output)

    @property
    def input_difference_pct(self) -> float:
        return _pct(self.server_input - self.asked_input, self.asked_input)


@dataclass(frozen=True)
class TokenCounts:
    rows: list[TokenCountRow]
    flags: list[str]  # one line per workload whose median prompt size misses the promise


def summarise_token_counts(requests: pd.DataFrame) -> TokenCounts:
    """One row per workload (and an `all` row when there are several)."""
    ok = (requests["outcome"] == "ok").to_numpy()
    codes, names = category_codes(requests["workload"])
    ok_codes = codes[ok]
    present, first = np.unique(ok_codes[ok_codes >= 0], return_index=True)
    order = present[np.argsort(first, kind="stable")]  # by first appearance
    columns = _Columns.of(requests)
    rows = [_row(columns, ok & (codes == code), names[code]) for code in order]
    if len(rows) > 1:
        rows.append(_row(columns, ok, ALL_WORKLOADS))
    flags = [
        f"{row.workload}: median prompt size {row.input_median_error_pct:+.1f} % off the asked "
        f"size (more than ±{INPUT_ERROR_FLAG_PCT:g} %)"
        for row in rows
        if row.workload != ALL_WORKLOADS
        and abs(row.input_median_error_pct) > INPUT_ERROR_FLAG_PCT
    ]
    return TokenCounts(rows=rows, flags=flags)


@dataclass(frozen=True)
class _Columns:
    """The columns every row reads, converted once (ten million rows each)."""

    client: np.ndarray  # the client's output count
    server: np.ndarray  # the server's output count
    has_output: np.ndarray  # both counts, the server's from usage
    image: np.ndarray  # image tokens asked (0 without)
    asked: np.ndarray  # input tokens asked, images included
    got: np.ndarray  # the server's prompt count
    has_input: np.ndarray  # an asked size and the server's count
    clamped: np.ndarray  # 1.0, 0.0 or NaN
    source_codes: np.ndarray
    source_names: list[str]

    @classmethod
    def of(cls, requests: pd.DataFrame) -> _Columns:
        client = requests["counted_output_tokens"].to_numpy(dtype=float)
        server = requests["output_tokens"].to_numpy(dtype=float)
        from_usage = (requests["token_source"] == "usage").to_numpy()
        image = (requests["image_tokens"].to_numpy(dtype=float) if "image_tokens" in requests
                 else np.zeros(len(requests)))
        image = np.where(np.isfinite(image), image, 0.0)
        asked = requests["target_input_tokens"].to_numpy(dtype=float) + image
        got = requests["input_tokens"].to_numpy(dtype=float)
        source_codes, source_names = category_codes(requests["prompt_token_source"])
        return cls(
            client=client, server=server,
            has_output=from_usage & np.isfinite(client) & np.isfinite(server),
            image=image, asked=asked, got=got,
            has_input=np.isfinite(asked) & (asked > 0) & np.isfinite(got),
            clamped=requests["prompt_clamped"].to_numpy(dtype=float),
            source_codes=source_codes, source_names=source_names,
        )


def _row(columns: _Columns, mask: np.ndarray, name: str) -> TokenCountRow:
    client, server, asked, got = columns.client, columns.server, columns.asked, columns.got
    both_out = mask & columns.has_output
    out_diff = (server[both_out] - client[both_out]).astype(np.int64)
    both_in = mask & columns.has_input
    error_pct = (got[both_in] - asked[both_in]) / asked[both_in] * 100.0
    picked = columns.source_codes[mask]
    counts = np.bincount(picked[picked >= 0], minlength=len(columns.source_names))
    sources = {source: int(c) for source, c in zip(columns.source_names, counts, strict=True)
               if c}
    return TokenCountRow(
        workload=name,
        ok=int(mask.sum()),
        output_compared=int(both_out.sum()),
        client_output=int(client[both_out].sum()),
        server_output=int(server[both_out].sum()),
        output_mismatched=int(np.count_nonzero(out_diff)),
        output_differences=_most_common(out_diff, _TOP_DIFFERENCES),
        input_compared=int(both_in.sum()),
        asked_input=int(asked[both_in].sum()),
        asked_image=int(columns.image[both_in].sum()),
        server_input=int(got[both_in].sum()),
        input_median_error_pct=float(np.median(error_pct)) if error_pct.size else math.nan,
        input_p95_abs_error_pct=(
            float(np.percentile(np.abs(error_pct), 95)) if error_pct.size else math.nan
        ),
        input_within_one=(
            float(np.mean(np.abs(got[both_in] - asked[both_in]) <= 1))
            if error_pct.size else math.nan
        ),
        prompt_sources=tuple(sorted(sources.items())),
        clamped=int(np.count_nonzero(mask & (columns.clamped == 1))),
    )


def _most_common(values: np.ndarray, k: int) -> tuple[tuple[int, int], ...]:
    """`Counter(values).most_common(k)` without a Python object per value: by count,
    ties in order of first appearance."""
    uniq, first, counts = np.unique(values, return_index=True, return_counts=True)
    order = np.lexsort((first, -counts))[:k]
    return tuple((int(uniq[i]), int(counts[i])) for i in order)


def _pct(part: float, whole: float) -> float:
    return part / whole * 100.0 if whole else math.nan
