"""Image inputs: one encoded image as a request carries it, and the rule that prices it
in prompt tokens.

The rule is Qwen2-VL's (Wang et al. 2024, "Qwen2-VL", §2.1; its image processor's
`patch_size` 14 and `merge_size` 2): the vision encoder cuts an image into 14×14-pixel
patches and merges each 2×2 of them into one token, so one token stands for a 28×28-pixel
square. Qwen's processor first resizes the image to multiples of 28 within its pixel
bounds; this rule rounds each side up to the next multiple instead and never rescales:
`ceil(width / 28) · ceil(height / 28)`. A workload may set another square
(`images.patch_pixels`) or a fixed count per image (`images.tokens_per_image`); the
embedded target prices every image with the default.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["DEFAULT_PATCH_PIXELS", "EncodedImage", "image_token_count"]

DEFAULT_PATCH_PIXELS = 28
"""Pixels per side of the square one image token stands for (Qwen2-VL: 14 × 2)."""


def image_token_count(width: int, height: int, patch_pixels: int = DEFAULT_PATCH_PIXELS,
                      ) -> int:
    """Prompt tokens one `width` × `height` image costs: one per `patch_pixels`² square,
    each side rounded up."""
    if width < 1 or height < 1 or patch_pixels < 1:
        raise ValueError(f"an image needs positive sides and patch (got {width}×{height}, "
                         f"patch {patch_pixels})")
    return math.ceil(width / patch_pixels) * math.ceil(height / patch_pixels)


@dataclass(frozen=True, slots=True)
class EncodedImage:
    """One image ready for the wire: its media type and its bytes in base64, with the
    size it was drawn at and the tokens it is asked to cost."""

    media_type: str  # image/png
    data_b64: str
    width: int
    height: int
    tokens: int

    @property
    def data_url(self) -> str:
        """The `data:` URL OpenAI's `image_url` and Responses' `input_image` take."""
        return f"data:{self.media_type};base64,{self.data_b64}"
