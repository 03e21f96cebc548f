"""HTTP/1.1 chunked transfer coding, undone incrementally: shared by the measuring
client (to know where a streamed body ends) and the layer proxy (to know when it may
reuse its upstream connection)."""

from __future__ import annotations


class ChunkedDecoder:
    """Undoes HTTP/1.1 chunked framing incrementally; knows when the body is complete."""

    def __init__(self) -> None:
        self._buf = b""
        self._remaining = 0  # payload bytes left in the current chunk
        self._need_crlf = False  # after a chunk's payload
        self.done = False

    def feed(self, data: bytes) -> bytes:
        """Return the payload bytes carried by `data`. Raises ValueError on bad framing."""
        buf = self._buf + data if self._buf else data
        out: list[bytes] = []
        pos = 0
        n = len(buf)
        while pos < n and not self.done:
            if self._remaining:
                take = min(self._remaining, n - pos)
                out.append(buf[pos : pos + take])
                pos += take
                self._remaining -= take
                if self._remaining == 0:
                    self._need_crlf = True
                continue
            if self._need_crlf:
                if n - pos < 2:
                    break
                if buf[pos : pos + 2] != b"\r\n":
                    raise ValueError("chunk not followed by CRLF")
                pos += 2
                self._need_crlf = False
                continue
            eol = buf.find(b"\r\n", pos)
            if eol < 0:
                if n - pos > 1024:
                    raise ValueError("chunk size line too long")
                break
            size_text = buf[pos:eol].split(b";", 1)[0].strip()
            try:
                size = int(size_text, 16)
            except ValueError:
                raise ValueError(f"bad chunk size {size_text[:20]!r}") from None
            pos = eol + 2
            if size == 0:
                self.done = True  # trailers, if any, are ignored
                break
            self._remaining = size
        self._buf = buf[pos:] if not self.done else b""
        return b"".join(out)
