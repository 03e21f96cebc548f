"""Reading workload files: YAML text to one validated `WorkloadFile`.

A file holds one workload or `workloads: [...]`. Any failure (unreadable file, invalid
YAML, a field that does not validate) is ONE `WorkloadError` naming the file and the
field path, e.g. `all.yaml: workloads[1].load.rate_rps: must be > 0`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import Field, TypeAdapter, ValidationError, field_validator

from zerohop.workloads.errors import WorkloadError, describe_errors
from zerohop.workloads.kinds import KIND_CLASS_NAMES, WorkloadSpec
from zerohop.workloads.model_base import StrictModel

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
    try:
        if "workloads" in data:
            return WorkloadFile.model_validate(data, context=context)
        single = _WORKLOAD_ADAPTER.validate_python(data, context=context)
    except ValidationError as exc:
        raise WorkloadError(f"{source}: {describe_errors(exc, data, _UNION_TAGS)}") from None
    return WorkloadFile(workloads=[single])


_WORKLOAD_ADAPTER: TypeAdapter[Any] = TypeAdapter(WorkloadSpec)

_UNION_TAGS = frozenset(
    {
        *KIND_CLASS_NAMES,
        *("closed", "open", "trace"),
        *("fixed", "uniform", "normal", "lognormal"),
        *("poisson", "gamma", "constant"),
        *("synthetic", "sharegpt", "mooncake"),
        *("ramp", "step", "spike", "piecewise"),
    }
)
"""Branch names pydantic puts into error locations; they are not fields the user wrote."""


class WorkloadFile(StrictModel):
    """What one YAML file declares: one or more workloads with unique names."""

    workloads: list[WorkloadSpec] = Field(min_length=1, description="The workloads, run by weight.")

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
