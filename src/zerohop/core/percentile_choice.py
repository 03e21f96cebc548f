"""`--percentiles`: which percentiles the results block prints (as `vllm bench serve
--metric-percentiles`), given once on the command line, validated there and read back
from the run's manifest. Pure Python: the CLI and the Locust plugin import it."""

from __future__ import annotations

DEFAULT_PERCENTILES_TEXT = "50,90,99"
PERCENTILES_HELP = ("Percentiles of TTFT, TPOT, ITL and E2E in the results block, "
                    "summary.json's `results` and results.csv, e.g. 50,90,99,99.9.")


def parse_percentiles(text: str) -> tuple[float, ...]:
    """`50,90,99` → (50.0, 90.0, 99.0), repeats dropped; each strictly between 0 and 100
    (else a one-line ValueError naming the flag)."""
    values = []
    for part in text.split(","):
        try:
            value = float(part.strip())
        except ValueError:
            raise ValueError(f"--percentiles: {part.strip()!r} is not a number "
                             "(e.g. 50,90,99)") from None
        if not 0.0 < value < 100.0:
            raise ValueError(f"--percentiles: {value:g} is not between 0 and 100")
        values.append(value)
    return tuple(dict.fromkeys(values))
