"""A workload's `images`: the synthetic PNGs (valid, sized, seeded), the asked-tokens
rule, the spec's one-line errors and the refusal of an API that takes text only."""

from __future__ import annotations

import base64
import struct
import zlib
from typing import Any

import numpy as np
import pytest

from zerohop.core.images import DEFAULT_PATCH_PIXELS, image_token_count
from zerohop.workloads.content.synthetic_images import BAND_ROWS, png_bytes
from zerohop.workloads.errors import WorkloadError
from zerohop.workloads.schema.image_spec import ImageSource, ImageSpec, image_refusal
from zerohop.workloads.yaml_io import parse_workloads

pytestmark = pytest.mark.unit


def _chunks(png: bytes) -> dict[bytes, bytes]:
    """Each chunk's data by type, after checking the signature and every CRC."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    chunks, at = {}, 8
    while at < len(png):
        (length,) = struct.unpack(">I", png[at:at + 4])
        kind, data = png[at + 4:at + 8], png[at + 8:at + 8 + length]
        (crc,) = struct.unpack(">I", png[at + 8 + length:at + 12 + length])
        assert crc == zlib.crc32(kind + data), kind
        chunks[kind] = data
        at += 12 + length
    assert list(chunks) == [b"IHDR", b"IDAT", b"IEND"]
    return chunks


@pytest.mark.parametrize(("width", "height"), [(1, 1), (17, 5), (640, 480), (3, 300),
                                               (1024, 1024)])
def test_a_png_is_valid_and_of_the_drawn_size(width: int, height: int) -> None:
    chunks = _chunks(png_bytes(width, height, np.random.default_rng(3)))
    assert struct.unpack(">IIBBBBB", chunks[b"IHDR"]) == (width, height, 8, 2, 0, 0, 0)
    rows = zlib.decompress(chunks[b"IDAT"])  # checks the combined Adler-32 too
    assert len(rows) == height * (3 * width + 1)
    assert all(rows[r * (3 * width + 1)] == 0 for r in range(height))  # filter: none


def test_pngs_are_seeded_and_differ_from_draw_to_draw() -> None:
    first = png_bytes(256, 256, np.random.default_rng(7))
    assert first == png_bytes(256, 256, np.random.default_rng(7))
    rng = np.random.default_rng(7)
    draws = [png_bytes(256, 256, rng) for _ in range(3)]
    assert draws[0] == first and len(set(draws)) == 3
    # only the drawn band differs: the rows below it are the same for every image
    below = [zlib.decompress(_chunks(d)[b"IDAT"])[BAND_ROWS * (3 * 256 + 1):] for d in draws]
    assert below[0] == below[1] == below[2]
    assert len(set(zlib.decompress(_chunks(d)[b"IDAT"]) for d in draws)) == 3


@pytest.mark.parametrize(("width", "height", "patch", "tokens"), [
    (28, 28, 28, 1), (29, 28, 28, 2), (1024, 1024, 28, 37 * 37), (640, 480, 28, 23 * 18),
    (1, 1, 28, 1), (1024, 1024, 14, 74 * 74), (100, 50, 10, 50)])
def test_the_asked_tokens_are_one_per_patch_each_side_rounded_up(
        width: int, height: int, patch: int, tokens: int) -> None:
    assert image_token_count(width, height, patch) == tokens
    assert DEFAULT_PATCH_PIXELS == 28  # Qwen2-VL: 14-pixel patches merged 2×2
    with pytest.raises(ValueError, match="positive"):
        image_token_count(0, height, patch)


def test_a_workload_may_change_the_rule() -> None:
    assert ImageSpec().tokens_for(1024, 1024) == 1369
    assert ImageSpec(patch_pixels=32).tokens_for(1024, 1024) == 32 * 32
    assert ImageSpec(tokens_per_image=576).tokens_for(1024, 1024) == 576


def test_a_source_draws_count_and_sizes_from_the_distributions() -> None:
    spec = ImageSpec.model_validate({"count": {"type": "uniform", "min": 1, "max": 3},
                                     "width": {"type": "uniform", "min": 30, "max": 90},
                                     "height": 56})
    source = ImageSource(spec, np.random.default_rng(1))
    requests = [source.next_images() for _ in range(40)]
    assert {len(images) for images in requests} == {1, 2, 3}
    for image in (i for images in requests for i in images):
        assert 30 <= image.width <= 90 and image.height == 56
        header = base64.b64decode(image.data_b64)[16:24]
        assert struct.unpack(">II", header) == (image.width, image.height)
        assert image.tokens == image_token_count(image.width, 56)
        assert image.data_url.startswith("data:image/png;base64,iVBORw0KGgo")
    again = ImageSource(spec, np.random.default_rng(1))
    assert [again.next_images() for _ in range(40)] == requests


def _flood(**images: Any) -> dict[str, Any]:
    return {"workloads": [{"kind": "short_query_flood", "name": "pics", "images": images}]}


@pytest.mark.parametrize(("images", "fragment"), [
    ({"format": "jpeg"}, "images.format: 'jpeg' is not a format zerohop encodes: use png"),
    ({"width": 0}, "images.width: must be > 0"),
    ({"height": {"type": "lognormal", "median": 500, "sigma": 1}},
     "images.height: at most 8192 pixels (set max; got no bound)"),
    ({"width": 10_000}, "images.width: at most 8192 pixels"),
    ({"count": 100}, "images.count: at most 64 images per request"),
    ({"patch_pixels": 0}, "images.patch_pixels: must be >= 1"),
    ({"tokens_per_image": 0}, "images.tokens_per_image: must be > 0"),
    ({"colour": "red"}, "images.colour: unknown field"),
])
def test_bad_image_options_are_one_line_errors(images: dict[str, Any], fragment: str) -> None:
    with pytest.raises(WorkloadError) as caught:
        parse_workloads(_flood(**images), source="w.yaml")
    message = str(caught.value)
    assert message.startswith("w.yaml: workloads[0].images.") and fragment in message, message
    assert "\n" not in message


def test_an_api_without_image_parts_refuses_the_workload() -> None:
    (spec,) = parse_workloads(_flood(count=2)).workloads
    refusal = image_refusal(spec, "openai-completions")
    assert refusal == ("workload 'pics' sends images and openai-completions takes text only: "
                       "use --api openai-chat or anthropic or openai-responses")
    for api in ("openai-chat", "anthropic", "openai-responses"):
        assert image_refusal(spec, api) is None
    (plain,) = parse_workloads({"workloads": [{"kind": "short_query_flood", "name": "p"}]}
                               ).workloads
    assert plain.images is None and image_refusal(plain, "openai-completions") is None
