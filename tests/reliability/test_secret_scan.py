"""The secrets scan sees a key in every form it claims to (tests/reliability/secret_scan.py),
so a clean scan of a run folder means something."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from urllib.parse import quote

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.reliability.secret_scan import leaks

pytestmark = pytest.mark.unit

SECRET = "sk-scan-SECRET/12+ab=cd"


@pytest.mark.parametrize("prefix", ["", "x", "xy", "a longer text before it: "])
def test_base64_is_found_at_any_offset(tmp_path: Path, prefix: str) -> None:
    for encode in (base64.b64encode, base64.urlsafe_b64encode):
        path = tmp_path / "blob.txt"
        path.write_bytes(b"data:" + encode(f"{prefix}{SECRET} and after".encode()))
        assert leaks([SECRET], [path]) == [f"{path}: sk-sca… (base64)"]


def test_url_encoded_and_literal_forms_are_named(tmp_path: Path) -> None:
    path = tmp_path / "page.html"
    path.write_text(f'<a href="/x?key={quote(SECRET, safe="")}">{SECRET}</a>')
    assert leaks([SECRET], [path]) == [f"{path}: sk-sca… (literal)",
                                       f"{path}: sk-sca… (url-encoded)"]
    assert leaks([SECRET], [], [f"GET /?k={quote(SECRET, safe='')}"]) == [
        "captured output #0: sk-sca… (url-encoded)"]


def test_inside_compressed_parquet_by_value(tmp_path: Path) -> None:
    """Compressed pages hide the bytes; the values are read, nested lists and maps too."""
    path = tmp_path / "requests.parquet"
    rows = {"request_id": [f"r{i}" for i in range(500)],
            "error_message": [f"attempt {i}: 401 for key {SECRET}" for i in range(500)],
            "tags": [["a", "b"]] * 499 + [["c", base64.b64encode(SECRET.encode()).decode()]]}
    pq.write_table(pa.table(rows), path, compression="gzip", use_dictionary=False,
                   write_statistics=False)
    assert SECRET.encode() not in path.read_bytes()  # a byte search would miss it
    assert leaks([SECRET], [path]) == [f"{path} (values): sk-sca… (literal)",
                                       f"{path} (values): sk-sca… (base64)"]


def test_a_clean_folder_and_other_secrets_are_not_reported(tmp_path: Path) -> None:
    path = tmp_path / "manifest.json"
    path.write_text(json.dumps({"api_key": "***", "note": "sk-scan-SECRET/12+ab=c"}))
    other = tmp_path / "clean.parquet"
    pq.write_table(pa.table({"x": ["***", "sk-scan"]}), other)
    assert leaks([SECRET], [path, other]) == []
