"""Locust's log and console pass through the secret scrubber.

A Locust process logs what it is told: an exception whose message holds the target's
URL with a `user:pass@` in it, an argv with `--api-key`, a key echoed in a server's
error. Those lines land in the run folder's locust.log and on the console, where no
secret may go (`core.redaction`). A filter on every handler Locust set up rewrites each
record, and its traceback, scrubbed, before any handler formats it; what is printed
past logging (gevent prints a failed greenlet's traceback to sys.stderr itself) goes
through a stream that scrubs each line.
"""

from __future__ import annotations

import io
import logging
import sys
import traceback
from typing import Any, TextIO

from zerohop.core.redaction import known_secrets, scrub


class ScrubbingFilter(logging.Filter):
    """Masks secrets in a record's message and traceback; never drops a record."""

    def __init__(self) -> None:
        super().__init__()
        self._secrets = known_secrets()

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = scrub(record.getMessage(), self._secrets)
        record.args = None
        if record.exc_info:
            record.exc_text = scrub("".join(traceback.format_exception(*record.exc_info)),
                                    self._secrets).rstrip("\n")
            record.exc_info = None
        elif record.exc_text:
            record.exc_text = scrub(record.exc_text, self._secrets)
        return True


class ScrubbingStream(io.TextIOBase):
    """A text stream that writes whole lines to `inner`, scrubbed (a secret split over
    two writes of one line is still seen); `flush` writes a pending partial line."""

    def __init__(self, inner: TextIO) -> None:
        super().__init__()
        self.inner = inner
        self._secrets = known_secrets()
        self._pending = ""

    def write(self, text: str) -> int:
        self._pending += text
        if "\n" in self._pending:
            lines, _, self._pending = self._pending.rpartition("\n")
            self.inner.write(scrub(lines, self._secrets) + "\n")
        return len(text)

    def flush(self) -> None:
        if self._pending:
            self.inner.write(scrub(self._pending, self._secrets))
            self._pending = ""
        self.inner.flush()

    def isatty(self) -> bool:
        return self.inner.isatty()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return self.inner.encoding

    @property
    def buffer(self) -> Any:  # code that writes bytes bypasses the scrub, as C code does
        return self.inner.buffer

    def fileno(self) -> int:
        return self.inner.fileno()


def scrub_log_output(**_: Any) -> None:
    """Install the filter on every handler of every logger (Locust's `init` event: its
    logging is set up by then), and the scrubbing stream as sys.stdout and sys.stderr.
    Idempotent."""
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if not isinstance(stream, ScrubbingStream):
            setattr(sys, name, ScrubbingStream(stream))
    loggers = [logging.getLogger(), *(logger for logger in logging.root.manager.loggerDict.values()
                                      if isinstance(logger, logging.Logger))]
    for logger in loggers:
        for handler in logger.handlers:
            if not any(isinstance(f, ScrubbingFilter) for f in handler.filters):
                handler.addFilter(ScrubbingFilter())
