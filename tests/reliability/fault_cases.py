"""The fault matrix: which injected fault, and the outcome a correct client gives it.

Kept apart from `fault_driver` (which monkey-patches with gevent) so pytest can import it.
"""

from __future__ import annotations

# fault header (None: none; "REFUSED": a closed port) → the outcome the client must give
CASES: dict[str, tuple[str | None, str]] = {
    "baseline": (None, "ok"),
    "refused": ("REFUSED", "connect_error"),
    "reset_mid": ("reset;after=3", "incomplete_stream"),
    "reset_before_status": ("reset;after=0", "connect_error|incomplete_stream"),
    "drop_mid": ("drop_mid;after=3", "incomplete_stream"),
    "drop_after_headers": ("drop_mid;after=0", "incomplete_stream"),
    "stall_before_first": ("stall_before_first;s=2", "timeout_ttft"),
    "stall_before_first_short": ("stall_before_first;s=0.3", "ok"),
    "stall_mid": ("stall_mid;after=3;s=2", "stall"),
    "stall_mid_short": ("stall_mid;after=3;s=0.3", "ok"),
    "slow_headers": ("slow_headers;s=2", "timeout_ttft"),
    "slow_headers_short": ("slow_headers;s=0.3", "ok"),
    "http_429": ("http_429", "http_429"),
    "http_429_nobody": ("http_429_nobody", "http_429"),
    "http_500": ("http_500", "http_500"),
    "http_500_nobody": ("http_500_nobody", "http_500"),
    "http_503": ("http_503", "http_503"),
    "http_503_nobody": ("http_503_nobody", "http_503"),
    "stream_error": ("stream_error;after=3", "stream_error:internal_error"),
    "stream_error_first": ("stream_error;after=0;type=overloaded_error",
                           "stream_error:overloaded_error"),
    "malformed_sse": ("malformed_sse;after=3", "GROUND_TRUTH"),
    "invalid_json": ("invalid_json;after=3", "GROUND_TRUTH"),
    "missing_terminator": ("missing_terminator", "incomplete_stream"),
    "oversized_chunk": ("oversized_chunk;after=3", "ok"),
}
