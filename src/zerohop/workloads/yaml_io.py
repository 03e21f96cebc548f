"""Reading workload files: YAML text to one validated `WorkloadFile`.

A file holds one workload or `workloads: [...]`. Any failure (unreadable file, invalid
YAML, a field that does not validate) is ONE `WorkloadError` naming the file and the
field path, e.g. `all.yaml: workloads[1].load.rate_rps: must be > 0`.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml
from pydantic import Field, TypeAdapter, ValidationError, create_model, field_validator

from zerohop.workloads.errors import WorkloadError, describe_errors
from zerohop.workloads.kind_registry import spec_union, workload_kinds
from zerohop.workloads.schema.model_base import StrictModel

__all__ = ["WorkloadFile", "load_workload_file", "parse_workloads"]


def load_workload_file(path: Path) -> WorkloadFile:
    """Read and validate one YAML workload file (one workload, or `workloads: [...]`)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise WorkloadError(f"{path}: cannot read workload file: {exc.strerror or exc}") from exc
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise WorkloadError(f"{path}:{where}: invalid YAML: {problem}") from exc
    return parse_workloads(data, source=path, base_dir=path.resolve().parent)


def parse_workloads(
    data: Any, *, source: Path | str = "<workloads>", base_dir: Path | None = None
) -> WorkloadFile:
    """Validate already-parsed YAML data; relative trace paths resolve against base_dir
    (default: the current directory)."""
    context = {"base_dir": Path(base_dir) if base_dir is not None else Path.cwd()}
    if data is None:
        raise WorkloadError(f"{source}: empty workload file (expected a workload or `workloads:`)")
    if not isinstance(data, Mapping):
        raise WorkloadError(
            f"{source}: expected a mapping (one workload, or `workloads: [...]`), "
            f"got {type(data).__name__}"
        )
    union = spec_union()  # the kinds registered now: a kind's module may register late
    file_model, one_workload = _file_model(union), _workload_adapter(union)
    try:
        if "workloads" in data:
            return file_model.model_validate(data, context=context)
        single = one_workload.validate_python(data, context=context)
    except ValidationError as exc:
        tags = _UNION_TAGS | {kind.name for kind in workload_kinds()}
        raise WorkloadError(f"{source}: {describe_errors(exc, data, tags)}") from None
    return file_model(workloads=[single])


@lru_cache(maxsize=8)
def _workload_adapter(union: Any) -> TypeAdapter[Any]:
    return TypeAdapter(union)


@lru_cache(maxsize=8)
def _file_model(union: Any) -> type[WorkloadFile]:
    """`WorkloadFile` whose workloads are of the given kinds."""
    return create_model(
        "WorkloadFile", __base__=WorkloadFile, __module__=__name__,
        workloads=(list[union], Field(min_length=1, description=_WORKLOADS_DESCRIPTION)))


_UNION_TAGS = frozenset(
    {
        *("closed", "open", "trace"),
        *("fixed", "uniform", "normal", "lognormal"),
        *("poisson", "gamma", "constant"),
        *("synthetic", "sharegpt", "mooncake"),
        *("ramp", "step", "spike", "piecewise"),
    }
)
"""Branch names pydantic puts into error locations; they are not fields the user wrote
(the registered kinds' names are too)."""
_WORKLOADS_DESCRIPTION = "The workloads, run by weight."


class WorkloadFile(StrictModel):
    """What one YAML file declares: one or more workloads with unique names (of the
    kinds registered when it is parsed: `_file_model` narrows `workloads` to them)."""

    workloads: list[Any] = Field(min_length=1, description=_WORKLOADS_DESCRIPTION)

    @field_validator("workloads")
    @classmethod
    def _unique_names(cls, workloads: list[Any]) -> list[Any]:
        seen: set[str] = set()
        names: list[str] = []
        for spec in workloads:
            if spec.name in seen:
                first = names.index(spec.name)
                raise ValueError(
                    f"duplicate workload name '{spec.name}' (workloads[{first}] and "
                    f"workloads[{len(names)}])"
                )
            seen.add(spec.name)
            names.append(spec.name)
        return workloads

    def by_name(self, name: str) -> Any:
        """The workload called `name`; KeyError lists the valid names."""
        for spec in self.workloads:
            if spec.name == name:
                return spec
        raise KeyError(f"no workload named '{name}' (have: {', '.join(self.names())})")

    def names(self) -> list[str]:
        return [spec.name for spec in self.workloads]
