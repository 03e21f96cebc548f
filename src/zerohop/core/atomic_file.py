"""Files written whole or not at all, with the mode the user's umask gives.

A temporary file beside the target, then a rename: a reader never sees half a page.
`tempfile.mkstemp` would create it 0600 whatever the umask, so a report written for a
team to read came out readable by its writer alone; the temporary file here is created
0666 less the umask, as `open()` would create the file itself.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path


def write_text_atomically(path: Path, text: str) -> Path:
    """Write `text` (UTF-8) to `path` via a temporary file and a rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    for _ in range(100):
        tmp = path.parent / f".{path.name}.{secrets.token_hex(4)}"
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        except FileExistsError:
            continue
        break
    else:
        raise FileExistsError(f"no free temporary name beside {path}")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path
