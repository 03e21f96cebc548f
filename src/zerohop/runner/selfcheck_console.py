"""The self-check's certificate as one screen of console text: the verdict, each judged
figure beside its bound, the CPU each process used, the processes the load needs and
the machine it holds for."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any


def certificate_lines(document: Mapping[str, Any], path: str = "") -> list[str]:
    figures = _map(document.get("figures"))
    bounds = _map(document.get("bounds"))
    verdict = _map(document.get("verdict"))
    load = _map(document.get("load"))
    machine = _map(document.get("machine"))
    result = str(verdict.get("result", "unknown"))
    lines = [f"zerohop selfcheck: {result}  "
             "(the client's own error, at this load, on this machine)"]
    row = lines.append
    row(_line("load", _load_text(load, figures)))
    row(_line("judged", f"{figures.get('requests_judged', 0)} requests, "
                        f"{figures.get('tokens_judged', 0)} tokens, after the first "
                        f"{_num(load.get('warmup_s'), 'g')} s"))
    ttft, e2e, itl = (_map(figures.get(k)) for k in ("ttft_error", "e2e_error", "itl_error"))
    row(_line("TTFT error", f"p99 {_ms(ttft.get('p99_ms'))}  (bound ≤ "
                            f"{_ms(bounds.get('max_ttft_error_ms'))})  p50 "
                            f"{_ms(ttft.get('p50_ms'))} · max {_ms(ttft.get('max_ms'))}"))
    row(_line("E2E error", f"p99 {_ms(e2e.get('p99_ms'))}  (not judged)"))
    row(_line("ITL error", f"p99 {_ms(itl.get('p99_ms'))}  over {itl.get('n', 0)} gaps, "
                           f"{figures.get('late_gaps', 0)} over 1 ms  (not judged)"))
    lag_bound = f"(bound ≤ {_ms(bounds.get('max_schedule_lag_ms'))})" \
        if load.get("mode") == "open" else "(closed loop: nothing is scheduled)"
    row(_line("schedule lag", f"p99 {_ms(figures.get('schedule_lag_p99_ms'))}  {lag_bound}"))
    for process in figures.get("cpu_processes") or []:
        process = _map(process)
        row(_line("client CPU", f"{process.get('source', '?')}: "
                                f"{_num(process.get('mean_pct'), '.1f')} % mean, "
                                f"{_num(process.get('peak_pct'), '.0f')} % peak of one core"))
    row(_line("CPU / request", f"{_num(figures.get('cpu_us_per_request'), '.0f')} µs"))
    row(_line("CPU headroom", f"{_num(figures.get('cpu_headroom_pct'), '.0f')} %  (bound ≥ "
                              f"{_num(bounds.get('min_cpu_headroom_pct'), 'g')} %)"))
    row(_line("processes", str(verdict.get("recommendation") or "—")))
    row(_line("machine", _machine_text(machine)))
    for reason in verdict.get("reasons") or []:
        row(_line("FAIL", str(reason)))
    if path:
        row(_line("certificate", path))
    return lines


def _load_text(load: Mapping[str, Any], figures: Mapping[str, Any]) -> str:
    processes = load.get("processes") or 1
    if load.get("mode") == "open":
        intended = load.get("intended_rps")
        text = f"open loop, {_num(intended, 'g')} req/s asked" if intended else "open loop"
    else:
        text = f"closed loop, {load.get('users')} users"
    return (f"{text}, {_num(figures.get('achieved_rps'), '.1f')} req/s achieved · "
            f"{processes} process{'es' if processes != 1 else ''} · "
            f"{_num(load.get('duration_s'), 'g')} s")


def _machine_text(machine: Mapping[str, Any]) -> str:
    text = f"{machine.get('hostname', '?')} · {machine.get('cpus', '?')} CPUs"
    target, client = machine.get("target_cpus") or [], machine.get("client_cpus") or []
    if target and target != client:
        text += f" (target on CPU {_cpus(target)}, client on CPU {_cpus(client)})"
    load = machine.get("load_avg_1m_before")
    if load is not None:
        text += f" · load average {load} before"
    return text


def _line(label: str, text: str) -> str:
    return f"  {label:<14}{text}"


def _cpus(cpus: list[Any]) -> str:
    return ",".join(str(c) for c in cpus)


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _num(value: Any, spec: str) -> str:
    if not isinstance(value, int | float) or isinstance(value, bool) or math.isnan(value):
        return "n/a"
    return format(value, spec)


def _ms(value: Any) -> str:
    text = _num(value, ".3g")
    return text if text == "n/a" else f"{text} ms"
