"""Records when a core was taken from every process on it: the fidelity test's floor.

Run pinned to the client's core at real-time priority (SCHED_FIFO), it wakes every
PERIOD and preempts any ordinary process at once, so a wake-up later than THRESHOLD
means nothing on that core could run: the hypervisor took the virtual CPU, or interrupts
did. The client cannot read what arrives then; the kernel merges the bytes that waited
under the last one's stamp. Each window runs from the probe's previous wake-up (the
last moment the core was known to be there) to the late one, in wall-clock seconds,
written as JSON lines when the probe is stopped (SIGTERM). A wake-up costs a few µs of
the core; a hold by the client itself (the negative control's hog) is invisible here,
since the probe preempts it.

    python tests/loadgen/cpu_stall_probe.py CPU OUT.jsonl
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time

PERIOD_S = 0.001
THRESHOLD_S = 0.0005


def main() -> int:
    cpu, out = int(sys.argv[1]), sys.argv[2]
    os.sched_setaffinity(0, {cpu})
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
        realtime = True
    except (OSError, AttributeError):  # not root, or not Linux: late wake-ups mean less
        realtime = False
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(True))
    windows: list[tuple[float, float]] = []
    perf, wall = time.perf_counter, time.time
    last = perf()
    offset = wall() - last
    while not stop:
        due = last + PERIOD_S
        time.sleep(max(0.0, due - perf()))
        now = perf()
        if now - due > THRESHOLD_S:
            windows.append((last + offset, now + offset))
        last = now
    with open(out, "w") as file:
        file.write(json.dumps({"realtime": realtime}) + "\n")
        for start, end in windows:
            file.write(json.dumps({"start": start, "end": end}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
