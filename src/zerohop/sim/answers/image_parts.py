"""The image parts of a request, as the embedded target reads them: each image's size
from its header alone, priced in prompt tokens by `core.images.image_token_count`.

Three shapes carry an image: OpenAI chat's `{"type": "image_url", "image_url": {"url":
"data:…"}}`, Responses' `{"type": "input_image", "image_url": "data:…"}` and Anthropic's
`{"type": "image", "source": {"type": "base64", "media_type", "data"}}`. Only base64 data
is read (the sim fetches no URL), and only PNG: the width and height are the first
fields of its IHDR chunk, so only the first bytes of the base64 are decoded, never the
pixels. A part that names an image it cannot read is an `ImageError` (HTTP 400); a part
of these types without image data at all stays a placeholder (`tokens.py`).
"""

from __future__ import annotations

import base64
import binascii
import struct
from typing import Any

from zerohop.core.images import image_token_count

__all__ = ["ImageError", "image_part", "image_part_tokens", "png_size"]

_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_HEADER_BYTES = 24  # signature, IHDR's length and type, width, height
_HEADER_B64 = 32  # base64 characters that hold at least _HEADER_BYTES bytes


class ImageError(ValueError):
    """An image part the sim cannot read (the message says why)."""


def image_part_tokens(part: dict[str, Any]) -> int | None:
    """The prompt tokens of one content part that carries image data; None for a part
    that does not (text, a tool result, an image part without data)."""
    image = image_part(part)
    return None if image is None else image[0]


def image_part(part: dict[str, Any]) -> tuple[int, str] | None:
    """(prompt tokens, base64 data) of one content part that carries image data; None
    for a part that does not."""
    kind = part.get("type")
    if kind == "image_url":
        given = part.get("image_url")
        url = given.get("url") if isinstance(given, dict) else given
    elif kind == "input_image":
        url = part.get("image_url")
    elif kind == "image" and "source" in part:
        media_type, data = _base64_source(part["source"])
        return _tokens(media_type, data), data
    else:
        return None
    if url is None:
        return None
    media_type, data = _data_url(url, str(kind))
    return _tokens(media_type, data), data


def png_size(header: bytes) -> tuple[int, int]:
    """(width, height) from a PNG's first 24 bytes; ImageError when they are not one."""
    if len(header) < _HEADER_BYTES or not header.startswith(_PNG_SIGNATURE) \
            or header[12:16] != b"IHDR":
        raise ImageError("image: not a PNG (the sim reads PNG images only)")
    width, height = struct.unpack(">II", header[16:24])
    if width < 1 or height < 1:
        raise ImageError(f"image: a PNG of {width}×{height} pixels")
    return width, height


def _tokens(media_type: str, data: str) -> int:
    if media_type != "image/png":
        raise ImageError(f"image: media type {media_type!r}: the sim reads image/png only")
    try:
        header = base64.b64decode(data[:_HEADER_B64], validate=True)
    except (binascii.Error, ValueError):
        raise ImageError("image: its data is not base64") from None
    width, height = png_size(header)
    return image_token_count(width, height)


def _data_url(url: object, kind: str) -> tuple[str, str]:
    if not isinstance(url, str) or not url.startswith("data:") or ";base64," not in url:
        raise ImageError(f"{kind}: the sim takes images as base64 data URLs "
                         "(data:image/png;base64,…) only")
    media_type, _, data = url[len("data:"):].partition(";base64,")
    return media_type, data


def _base64_source(source: object) -> tuple[str, str]:
    if not isinstance(source, dict) or source.get("type") != "base64" \
            or not isinstance(source.get("data"), str):
        raise ImageError("image: the sim takes a source of type base64 with its data only")
    return str(source.get("media_type")), source["data"]
