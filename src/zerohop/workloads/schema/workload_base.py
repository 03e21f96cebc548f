"""What every workload kind shares: its name, weight, API, model, sampling, prompt
format, SLOs and client policy (`WorkloadBase`), the SLO block itself, and the base of
the kinds that build their prompts from text (`TextPromptWorkload`).

The kinds (`kinds`, `agent_spec`) add what they send on top.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, ValidationInfo, field_validator, model_validator

from zerohop.core.apis import APIS, ApiName, api_spec, structured_apis
from zerohop.core.json_schema import check_schema
from zerohop.core.slo import SloError, parse_slo_mapping, request_meets
from zerohop.workloads.schema.image_spec import ImageSpec
from zerohop.workloads.schema.model_base import StrictModel
from zerohop.workloads.schema.policy_spec import Policy

__all__ = ["SloSpec", "TextPromptWorkload", "WorkloadBase", "structured_refusal"]


_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]*$"


class SloSpec(StrictModel):
    """Service-level objectives in the one SLO grammar (`core.slo`, docs/slo.md), e.g.
    `{ttft_p99_ms: 500, e2e_ms: 2000}`. Each objective judges the workload's requests on
    its statistic and sets the per-request threshold its goodput counts against; the
    run's `--slo`, when given, replaces every workload's own."""

    model_config = ConfigDict(extra="allow", frozen=True)  # the keys are the grammar's
    __pydantic_extra__: dict[str, Annotated[float, Field(gt=0, allow_inf_nan=False)]]

    @model_validator(mode="after")
    def _in_the_grammar(self) -> SloSpec:
        try:
            parse_slo_mapping(self.objectives, where="slo")
        except SloError as exc:  # the error's path already says `slo`
            raise ValueError(str(exc).removeprefix("slo: ")) from None
        return self

    @property
    def objectives(self) -> dict[str, float]:
        """The objectives as the manifest and `--slo` write them (key → ms)."""
        return {str(k): float(v) for k, v in (self.model_extra or {}).items()}

    def request_meets(self, **values: float | None) -> bool:
        """True when one successful request meets every per-request threshold (`ttft_ms=`,
        `tpot_ms=`, ...). A missing measurement (no TPOT for a 1-token answer) passes."""
        return request_meets(parse_slo_mapping(self.objectives, where="slo"), values)


class WorkloadBase(StrictModel):
    """The fields every workload kind shares."""

    name: str = Field(
        pattern=_NAME_PATTERN,
        max_length=64,
        description="Unique name of the workload (letters, digits, _ . -); recorded per request.",
    )
    weight: int | None = Field(
        default=None,
        gt=0,
        description="Locust user weight of this workload when workloads run together "
        "(None: the weight of its kind's user class in loadtests/).",
    )
    api: ApiName | None = Field(
        default=None,
        description="Protocol override: openai-chat | openai-completions | anthropic | "
        "openai-responses (None: the run's default).",
    )
    model: str | None = Field(
        default=None,
        min_length=1,
        description="Model name to request (None: the server's first model).",
    )
    ignore_eos: bool = Field(
        default=True,
        description="Ask the server to ignore end-of-sequence so outputs reach max_tokens "
        "(vLLM/SGLang extension; ignored by servers that do not know it).",
    )
    temperature: float = Field(default=0.0, ge=0, le=2, description="Sampling temperature.")
    seed: int | None = Field(
        default=None, ge=0, description="Seed of this workload's randomness (None: the run's seed)."
    )
    prompt_format: Literal["text", "token_ids"] = Field(
        default="text",
        description="`text`: generated words sized by calibration; `token_ids`: random token "
        "ids sent on the completions API (exact size; needs api: openai-completions).",
    )
    token_id_vocab_size: int = Field(
        default=32000,
        gt=1000,
        description="Token ids are drawn below this (prompt_format token_ids).",
    )
    slo: SloSpec = Field(
        default_factory=lambda: SloSpec.model_validate({}),
        description="Objectives in the SLO grammar (docs/slo.md), e.g. {ttft_p99_ms: 500}: "
        "they decide this workload's goodput and verdict; a run's --slo replaces them.",
    )
    response_format: dict[str, Any] | None = Field(
        default=None,
        description="Structured output: a JSON schema the answer must follow, sent as chat's "
        "response_format (json_schema) or Responses' text.format; each ok answer is judged "
        "(record field structured_output). Supported keywords: core/json_schema.py.",
    )
    images: ImageSpec | None = Field(
        default=None,
        description="Image inputs: synthetic images sent before the text of each request "
        "(count, width, height as distributions; chat-style APIs only), their asked tokens "
        "recorded beside the server's prompt usage (record field image_tokens).",
    )
    policy: Policy | None = Field(
        default=None,
        description="Client policy: timeouts, retries, continuation, fallback chain (None: one "
        "attempt per request, the run's timeouts).",
    )

    @field_validator("response_format")
    @classmethod
    def _schema_in_the_supported_subset(cls, value: dict[str, Any] | None
                                        ) -> dict[str, Any] | None:
        if value is not None:
            check_schema(value, "response_format")  # ValueError names the keyword
        return value

    @field_validator("prompt_format")
    @classmethod
    def _token_ids_need_completions(cls, value: str, info: ValidationInfo) -> str:
        api = info.data.get("api")
        if value == "token_ids" and (api is None or not api_spec(api).takes_token_ids):
            takers = " or ".join(spec.name for spec in APIS.values() if spec.takes_token_ids)
            raise ValueError(f"token_ids needs api: {takers}")
        return value


class TextPromptWorkload(WorkloadBase):
    """A kind that builds its prompts from text (conversations, shared prefixes, agent
    loops): `prompt_format` must stay `text`."""

    @field_validator("prompt_format")
    @classmethod
    def _text_only(cls, value: str) -> str:
        if value != "text":
            raise ValueError("this kind builds its prompts from text: use prompt_format: text")
        return value


def structured_refusal(spec: WorkloadBase, run_api: str) -> str | None:
    """Why `spec` cannot run on the API it would use (its own `api`, else the run's): its
    `response_format` needs an API that takes a JSON schema. None when it can."""
    api = spec.api or run_api
    if spec.response_format is not None and not api_spec(api).structured_output:
        return (f"workload '{spec.name}' asks for a response_format and {api} takes no JSON "
                f"schema: use --api {structured_apis()}")
    return None
