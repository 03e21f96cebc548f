"""A workload's image inputs (`images:`): how many images each request carries, their
sizes, their format, and how many prompt tokens each is asked to cost.

The images themselves are made by `synthetic_images`; the tokens rule is
`core.images.image_token_count` (Qwen2-VL's 28×28 pixels per token), which a workload
may change.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from pydantic import Field, field_validator

from zerohop.core.apis import APIS, api_spec
from zerohop.core.images import DEFAULT_PATCH_PIXELS, EncodedImage, image_token_count
from zerohop.workloads.content.synthetic_images import ImageMaker
from zerohop.workloads.schema.distributions import Distribution, DistributionBase, fixed_by_default
from zerohop.workloads.schema.model_base import StrictModel

__all__ = ["MAX_IMAGES_PER_REQUEST", "MAX_IMAGE_SIDE", "ImageSource", "ImageSpec",
           "image_refusal"]

MAX_IMAGE_SIDE = 8192
"""Pixels: a side above this is a mistake in a file, not a benchmark (8K is 7680)."""
MAX_IMAGES_PER_REQUEST = 64
FORMATS = ("png",)  # what `synthetic_images` can encode without an imaging library


class ImageSpec(StrictModel):
    """Synthetic images sent with every request of the workload, before its text, as the
    API's image parts (base64): each drawn `width` × `height`, with seeded content."""

    count: Distribution = fixed_by_default(1, "Images per request (int or distribution).")
    width: Distribution = fixed_by_default(512, "Image width in pixels (int or distribution).")
    height: Distribution = fixed_by_default(
        512, "Image height in pixels (int or distribution).")
    format: str = Field(default="png", description="Encoding: png (the only one).")
    patch_pixels: int = Field(
        default=DEFAULT_PATCH_PIXELS, ge=1, le=1024,
        description="The asked tokens per image are ceil(w/p)·ceil(h/p) for this p (28: "
        "Qwen2-VL's 14-px patches merged 2×2).")
    tokens_per_image: int | None = Field(
        default=None, gt=0,
        description="A fixed count of asked tokens per image instead (a model whose "
        "encoder resizes every image to one size).")

    @field_validator("format")
    @classmethod
    def _known_format(cls, value: str) -> str:
        if value not in FORMATS:
            raise ValueError(f"{value!r} is not a format zerohop encodes: use "
                             f"{' or '.join(FORMATS)}")
        return value

    @field_validator("width", "height")
    @classmethod
    def _side_bounded(cls, dist: DistributionBase) -> DistributionBase:
        high = dist.bounds()[1]
        if high is None or high > MAX_IMAGE_SIDE:
            raise ValueError(f"at most {MAX_IMAGE_SIDE} pixels (set max; got "
                             f"{'no bound' if high is None else high})")
        return dist

    @field_validator("count")
    @classmethod
    def _count_bounded(cls, dist: DistributionBase) -> DistributionBase:
        high = dist.bounds()[1]
        if high is None or high > MAX_IMAGES_PER_REQUEST:
            raise ValueError(f"at most {MAX_IMAGES_PER_REQUEST} images per request (set "
                             f"max; got {'no bound' if high is None else high})")
        return dist

    def tokens_for(self, width: int, height: int) -> int:
        """The prompt tokens one image of this size is asked to cost."""
        if self.tokens_per_image is not None:
            return self.tokens_per_image
        return image_token_count(width, height, self.patch_pixels)


def image_refusal(spec: Any, run_api: str) -> str | None:
    """Why `spec` cannot run on the API it would use (its own `api`, else the run's): its
    `images` need an API that takes image parts. None when it can."""
    api = spec.api or run_api
    if getattr(spec, "images", None) is not None and not api_spec(api).images:
        takers = " or ".join(s.name for s in APIS.values() if s.images)
        return (f"workload '{spec.name}' sends images and {api} takes text only: "
                f"use --api {takers}")
    return None


class ImageSource:
    """A workload's images, request by request, from one seeded generator: the count and
    each size drawn from the spec's distributions, the content from `synthetic_images`."""

    def __init__(self, spec: ImageSpec, rng: np.random.Generator) -> None:
        self._spec = spec
        self._rng = rng
        self._maker = ImageMaker(rng, spec.tokens_for)

    def next_images(self) -> tuple[EncodedImage, ...]:
        spec, rng = self._spec, self._rng
        return tuple(self._maker.image(spec.width.sample_one(rng), spec.height.sample_one(rng))
                     for _ in range(spec.count.sample_one(rng)))
