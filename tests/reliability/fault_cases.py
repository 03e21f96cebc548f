"""The fault matrix's cases: each case's name and the `x-zerohop-fault` header it sends.

Kept apart from `fault_driver` (which monkey-patches with gevent) so pytest can import it.
The outcome a correct client must give each case is written in the test that judges it
(test_fault_matrix.py), from what the fault is, never from what the sim reports.
"""

from __future__ import annotations

# case → fault header (None: none; "REFUSED": a closed port, no request reaches the sim)
FAULTS: dict[str, str | None] = {
    "baseline": None,
    "refused": "REFUSED",
    "reset_mid": "reset;after=3",
    "reset_before_status": "reset;after=0",
    "drop_mid": "drop_mid;after=3",
    "drop_after_headers": "drop_mid;after=0",
    "stall_before_first": "stall_before_first;s=2",
    "stall_before_first_short": "stall_before_first;s=0.3",
    "stall_mid": "stall_mid;after=3;s=2",
    "stall_mid_short": "stall_mid;after=3;s=0.3",
    "slow_headers": "slow_headers;s=2",
    "slow_headers_short": "slow_headers;s=0.3",
    "http_429": "http_429",
    "http_429_nobody": "http_429_nobody",
    "http_500": "http_500",
    "http_500_nobody": "http_500_nobody",
    "http_503": "http_503",
    "http_503_nobody": "http_503_nobody",
    "stream_error": "stream_error;after=3",
    "stream_error_first": "stream_error;after=0;type=overloaded_error",
    "malformed_sse": "malformed_sse;after=3",
    "invalid_json": "invalid_json;after=3",
    "missing_terminator": "missing_terminator",
    "oversized_chunk": "oversized_chunk;after=3",
}
