"""Finds a secret however a file or a log carries it: as written, base64-encoded (at any
offset in a longer encoded text, standard or URL-safe alphabet), URL-encoded, and inside
Parquet files, whose compressed pages a byte search cannot see (their values are read
and searched, with the same encodings).

A run folder is a tree of JSON, JSONL, HTML, YAML and Parquet; a secret that reached any
of them in any of these forms has leaked.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote, quote_plus

import pyarrow.parquet as pq


def _base64_forms(secret: bytes) -> set[bytes]:
    """What `secret` looks like inside any base64 text, whatever its offset there: the
    encoding of the secret shifted by 0, 1 or 2 bytes, less the characters that depend
    on the bytes around it."""
    forms = set()
    for shift in range(3):
        encoded = base64.b64encode(b"\0" * shift + secret)
        lead = (shift * 8 + 5) // 6  # characters that mix in the padding before it
        tail = len(secret) + shift
        whole = tail - tail % 3  # bytes fully inside complete groups
        stable = encoded[lead:whole // 3 * 4]
        for alphabet in (stable, stable.replace(b"+", b"-").replace(b"/", b"_")):
            if len(alphabet) >= 8:
                forms.add(alphabet)
    return forms


def forms_of(secret: str) -> dict[str, bytes | set[bytes]]:
    """Every form the scan looks for, by name."""
    raw = secret.encode()
    forms: dict[str, bytes | set[bytes]] = {"literal": raw, "base64": _base64_forms(raw)}
    for name, encoded in (("url-encoded", quote(secret, safe="")),
                          ("url-encoded (form)", quote_plus(secret, safe=""))):
        if encoded.encode() not in (raw, forms.get("url-encoded")):
            forms[name] = encoded.encode()
    return forms


def _found_in(data: bytes, secret: str) -> list[str]:
    hits = []
    for name, form in forms_of(secret).items():
        candidates = form if isinstance(form, set) else {form}
        if any(c in data for c in candidates):
            hits.append(name)
    return hits


def _flatten(value: Any) -> Iterator[str]:
    if isinstance(value, dict):
        for key, item in value.items():
            yield str(key)
            yield from _flatten(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _flatten(item)
    elif isinstance(value, bytes):
        yield value.decode("utf-8", "replace")
    elif value is not None:
        yield str(value)


def parquet_text(path: Path) -> bytes:
    """Every value of a Parquet file (and its schema's metadata), as text."""
    table = pq.read_table(path)
    parts = [json.dumps({k.decode("utf-8", "replace"): v.decode("utf-8", "replace")
                         for k, v in (table.schema.metadata or {}).items()})]
    for column in table.column_names:
        parts.append(column)
        parts.extend(_flatten(table.column(column).to_pylist()))
    return "\n".join(parts).encode()


def leaks(secrets: Iterable[str], paths: Iterable[Path], texts: Iterable[str] = ()) -> list[str]:
    """`path: secret[:6]… (form)` for every secret found, in files (Parquet by value)
    and in captured output."""
    wanted = [s for s in secrets if s]
    found = []
    sources: list[tuple[str, bytes]] = []
    for path in paths:
        sources.append((str(path), path.read_bytes()))
        if path.suffix == ".parquet":
            sources.append((f"{path} (values)", parquet_text(path)))
    sources.extend((f"captured output #{i}", text.encode()) for i, text in enumerate(texts))
    for where, data in sources:
        for secret in wanted:
            for form in _found_in(data, secret):
                found.append(f"{where}: {secret[:6]}… ({form})")
    return found
