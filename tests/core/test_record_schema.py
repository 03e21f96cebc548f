"""The record's schema is written once, on `RequestRecord`'s fields: the Parquet
schema, the analysis' column lists and the catalogue's record metrics agree with it
because they are derived from it (core/records.py)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import pyarrow as pa
import pytest

from zerohop.analysis import run_data
from zerohop.core import records
from zerohop.core.metrics import CATALOGUE
from zerohop.core.records import (
    CATEGORY,
    KINDS,
    NUMBER,
    RECORD_COLUMNS,
    RECORD_FIELDS,
    TEXT,
    RequestRecord,
    entry,
    record_columns,
)
from zerohop.storage.run_folder import arrow_types, requests_schema

pytestmark = pytest.mark.unit
# Catalogue groups that are run rates or per-user rates, not a column of the record.
NOT_RECORD_GROUPS = ("rate", "per_user")


def test_every_record_field_has_one_schema_entry() -> None:
    assert tuple(f.name for f in dataclasses.fields(RequestRecord)) == RECORD_FIELDS
    for c in RECORD_COLUMNS:
        assert c.kind in KINDS and c.doc, c
    by_name = {c.name: c for c in RECORD_COLUMNS}
    assert by_name["ttft_ms"].kind == "float" and by_name["ttft_ms"].nullable
    assert by_name["itl_ms"].kind == "list[float]" and not by_name["itl_ms"].nullable
    assert by_name["prompt_clamped"].kind == "bool"
    assert by_name["request_id"].kind == "str" and not by_name["request_id"].nullable


def test_a_field_without_an_entry_or_of_an_unstorable_type_is_refused() -> None:
    @dataclass
    class Bare(RequestRecord):
        gpu_joules: float | None = None

    @dataclass
    class Nested(RequestRecord):
        extras: dict[str, int] | None = dataclasses.field(
            default=None, metadata=entry("no Parquet type for this"))

    with pytest.raises(TypeError, match="gpu_joules has no schema entry"):
        record_columns(Bare)
    with pytest.raises(TypeError, match="extras: type"):
        record_columns(Nested)


def test_the_parquet_schema_is_the_records() -> None:
    assert set(arrow_types()) == set(KINDS)
    schema = requests_schema()
    assert schema.names == list(RECORD_FIELDS)
    for c in RECORD_COLUMNS:
        assert schema.field(c.name).type == arrow_types()[c.kind], c.name
    assert schema.field("ttft_ms").type == pa.float64()
    assert schema.field("output_tokens").type == pa.int64()
    assert schema.field("tokens_per_event").type == pa.list_(pa.int64())


def test_the_analysis_reads_the_columns_the_record_says() -> None:
    assert run_data.read_as(NUMBER) == run_data.FLOAT_COLUMNS
    assert run_data.read_as(CATEGORY) == run_data.CATEGORY_COLUMNS
    assert run_data.read_as(TEXT) == run_data.TEXT_COLUMNS
    assert set(run_data.REQUEST_COLUMNS) == {c.name for c in RECORD_COLUMNS if c.read}
    itl = next(c for c in RECORD_COLUMNS if c.name == run_data.LIST_COLUMN)
    assert itl.kind == "list[float]"
    for c in RECORD_COLUMNS:  # only a number can be read as one; a list is read apart
        if c.read == NUMBER:
            assert c.kind in ("float", "int", "bool"), c.name
        if c.kind.startswith("list"):
            assert c.read is None, c.name


def test_each_per_request_metric_of_the_catalogue_is_a_record_column_in_its_unit() -> None:
    by_name = {c.name: c for c in RECORD_COLUMNS}
    for m in CATALOGUE:
        if m.group in NOT_RECORD_GROUPS:
            assert m.name not in by_name, m.name
            continue
        c = by_name[m.name]
        assert c.unit == m.unit, m.name
        assert c.read == NUMBER or c.kind == "list[float]", m.name


def test_a_row_carries_every_field() -> None:
    record = RequestRecord(request_id="r", workload="w", api="openai-chat", model="m")
    assert tuple(record.to_row()) == records.RECORD_FIELDS
