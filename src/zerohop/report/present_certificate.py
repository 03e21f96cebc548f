"""The client certificate on the report's first screen: one verdict line from the
self-check the run carries in its manifest (`zerohop run --selfcheck`), so a reader
knows how far the client's own timings can be trusted at this load."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from zerohop.analysis.client.client_certificate import certificate_view


def certificate_check(manifest: Mapping[str, Any]) -> dict[str, str] | None:
    """A verdict item ({status, text}), or None when the run has no certificate."""
    document = manifest.get("client_certificate")
    if not isinstance(document, Mapping):
        return None
    view = certificate_view(document)
    figures = (f"TTFT error p99 {_ms(view.ttft_error_p99_ms)} (bound "
               f"{_ms(view.max_ttft_error_ms)}), schedule lag p99 "
               f"{_ms(view.schedule_lag_p99_ms)}, CPU headroom {_pct(view.cpu_headroom_pct)}")
    if view.result == "PASS":
        return {"status": "ok", "text": f"client certificate PASS: {figures}"}
    why = "; ".join(view.reasons) or "no reason recorded"
    text = f"client certificate {view.result}: {why}"
    if view.recommendation:
        text += f"; {view.recommendation}"
    return {"status": "warn", "text": text}


def _ms(value: float) -> str:
    return "n/a" if math.isnan(value) else f"{value:.3g} ms"


def _pct(value: float) -> str:
    return "n/a" if math.isnan(value) else f"{value:.0f} %"
