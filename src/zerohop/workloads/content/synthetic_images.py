"""Synthetic PNG images, made locally and fast enough to make one per request.

No imaging library: a PNG is an IHDR chunk, one zlib stream of filtered rows (IDAT) and
IEND (RFC 2083), written here with `zlib` and `struct`. Each image is 8-bit RGB in
16-pixel tiles of colour: a first band of rows drawn from the caller's seeded generator
(so no two images of a run are the same bytes, which a server's image cache would serve
for free), the rest shared by every image of that size. The shared rows are compressed
once per size, as a raw deflate stream of their own; the drawn band is compressed and
ended with a full flush (its blocks end on a byte boundary and the shared part refers to
nothing before it), so the two concatenate into one valid stream, and the zlib trailer's
Adler-32 is combined from the two parts' without reading the shared rows again. An image
costs its band's compression and its base64, whatever its height.
"""

from __future__ import annotations

import base64
import struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from zerohop.core.images import EncodedImage

__all__ = ["ImageMaker", "png_bytes"]

TILE_PIXELS = 16
BAND_ROWS = 16  # the rows drawn per image
_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_ZLIB_HEADER = b"\x78\x01"  # deflate, 32 KiB window, fastest; (0x7801 % 31 == 0)
_ADLER_MOD = 65521
_RGB = 2  # IHDR colour type: truecolour


@dataclass(frozen=True, slots=True)
class _SharedRows:
    """The rows below the band of every image of one size, compressed once."""

    deflated: bytes  # raw deflate, ending with the final block
    adler: int  # Adler-32 of the filtered rows
    length: int  # bytes of filtered rows


def png_bytes(width: int, height: int, rng: np.random.Generator) -> bytes:
    """A `width` × `height` RGB PNG whose first band of rows is drawn from `rng`."""
    if width < 1 or height < 1:
        raise ValueError(f"an image needs positive sides (got {width}×{height})")
    band_rows = min(BAND_ROWS, height)
    band = _filtered_rows(_tiles(rng, band_rows, width))
    squeezer = zlib.compressobj(1, zlib.DEFLATED, -15)
    head = squeezer.compress(band) + squeezer.flush(zlib.Z_FULL_FLUSH)
    shared = _shared_rows(width, height - band_rows)
    adler = _adler32_combine(zlib.adler32(band), shared.adler, shared.length)
    idat = _ZLIB_HEADER + head + shared.deflated + struct.pack(">I", adler)
    ihdr = struct.pack(">IIBBBBB", width, height, 8, _RGB, 0, 0, 0)
    return (_PNG_SIGNATURE + _chunk(b"IHDR", ihdr) + _chunk(b"IDAT", idat)
            + _chunk(b"IEND", b""))


class ImageMaker:
    """Draws a request's images from one seeded generator: count and sizes from the
    caller's draws, content from `png_bytes`, and each image's asked tokens."""

    def __init__(self, rng: np.random.Generator, tokens_for: Callable[[int, int], int]
                 ) -> None:
        self._rng = rng
        self._tokens_for = tokens_for

    def image(self, width: int, height: int) -> EncodedImage:
        data = png_bytes(width, height, self._rng)
        return EncodedImage("image/png", base64.b64encode(data).decode("ascii"),
                            width, height, self._tokens_for(width, height))


def _tiles(rng: np.random.Generator, rows: int, width: int) -> np.ndarray:
    """`rows` × `width` RGB pixels in square tiles of random colour."""
    tile_rows = -(-rows // TILE_PIXELS)
    tile_cols = -(-width // TILE_PIXELS)
    colours = rng.integers(0, 256, size=(tile_rows, tile_cols, 3), dtype=np.uint8)
    pixels = np.repeat(np.repeat(colours, TILE_PIXELS, axis=0), TILE_PIXELS, axis=1)
    return pixels[:rows, :width]


def _filtered_rows(pixels: np.ndarray) -> bytes:
    """Each row after its filter byte (0: none), as the IDAT stream holds it."""
    rows = pixels.reshape(pixels.shape[0], -1)
    framed = np.zeros((rows.shape[0], rows.shape[1] + 1), dtype=np.uint8)
    framed[:, 1:] = rows
    return framed.tobytes()


@lru_cache(maxsize=32)
def _shared_rows(width: int, rows: int) -> _SharedRows:
    filtered = _filtered_rows(_tiles(np.random.default_rng([width, rows]), rows, width)) \
        if rows else b""
    squeezer = zlib.compressobj(1, zlib.DEFLATED, -15)
    deflated = squeezer.compress(filtered) + squeezer.flush(zlib.Z_FINISH)
    return _SharedRows(deflated, zlib.adler32(filtered), len(filtered))


def _adler32_combine(first: int, second: int, second_length: int) -> int:
    """Adler-32 of A+B from A's, B's and B's length (zlib's adler32_combine)."""
    a1, b1 = first & 0xFFFF, first >> 16
    a2, b2 = second & 0xFFFF, second >> 16
    a = (a1 + a2 - 1) % _ADLER_MOD
    b = (b1 + b2 + second_length * (a1 - 1)) % _ADLER_MOD
    return (b << 16) | a


def _chunk(kind: bytes, data: bytes) -> bytes:
    return (struct.pack(">I", len(data)) + kind + data
            + struct.pack(">I", zlib.crc32(kind + data)))
