"""The exit codes every zerohop command shares, and the error that carries one.

Exit codes: 0 ok · 1 an SLO was missed (or, for `compare`/`nightly`, a regression) ·
2 bad input · 3 target unreachable · 4 no request succeeded · 5 a load-generator worker
failed or left early (the run is partial) · 128 + N stopped by signal N (130 SIGINT,
143 SIGTERM), as shells report it. Results folders and reports are still written for
1, 4, 5 and the signals.
"""

from __future__ import annotations

from zerohop.core.redaction import known_secrets, scrub

EXIT_OK = 0
EXIT_SLO = 1
EXIT_REGRESSION = 1  # compare and nightly: a gate found the run worse
EXIT_BAD_INPUT = 2
EXIT_UNREACHABLE = 3
EXIT_NO_SUCCESS = 4
EXIT_WORKER_FAILED = 5
EXIT_INTERRUPTED_BASE = 128


class RunError(Exception):
    """An error with its exit code, shown to the user as one line. Every command prints
    it, so its message is scrubbed of secrets here (a URL's password, a key the
    environment holds, a secret flag's value), once for all of them."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(scrub(message, known_secrets()))
        self.code = code


def one_line(exc: BaseException) -> str:
    """An error whose text carries a child's stderr tail, as one line: the summary and
    the child's last words (where the cause usually is)."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    if len(lines) <= 1:
        return lines[0] if lines else type(exc).__name__
    return f"{lines[0]}: {lines[-1]}"
