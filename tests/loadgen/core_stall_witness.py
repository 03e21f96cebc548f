"""A witness of the client core being taken away, for the TTFT-against-the-wire test.

Pinned to the clients' core at their priority, it sleeps WAKE_EVERY_S at a time and
notes every wake-up that came more than STALL_S late: the interval in which nothing at
that priority could run there (the hypervisor took the virtual CPU, the machine stalled
on I/O, a higher-priority task ran). A client whose own loop is late (a blocking call, a
long computation, a held read) does not delay the witness: the kernel wakes it at once,
so what it records is the machine's doing, never the client's.

    python tests/loadgen/core_stall_witness.py OUT

runs until SIGTERM, then writes one JSON line per stall to OUT:
{"from_ns": ..., "to_ns": ...} (CLOCK_REALTIME).
"""

from __future__ import annotations

import json
import signal
import sys
import time

WAKE_EVERY_S = 0.001
STALL_S = 0.002  # a wake-up this late at the clients' priority: the core was not theirs


def main() -> int:
    out = sys.argv[1]
    stalls: list[dict[str, int]] = []
    running = True

    def stop(_signum: int, _frame: object) -> None:
        nonlocal running
        running = False

    signal.signal(signal.SIGTERM, stop)
    limit_ns = int((WAKE_EVERY_S + STALL_S) * 1e9)
    while running:
        before = time.time_ns()
        time.sleep(WAKE_EVERY_S)
        after = time.time_ns()
        if after - before > limit_ns:
            stalls.append({"from_ns": before + int(WAKE_EVERY_S * 1e9), "to_ns": after})
    with open(out, "w") as file:
        file.writelines(json.dumps(stall) + "\n" for stall in stalls)
    return 0


if __name__ == "__main__":
    sys.exit(main())
