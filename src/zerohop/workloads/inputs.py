"""A run's inputs, checked before it starts: its workload files and what they point at.

Pure reading, no Locust: the CLI and the planners check a run's inputs with these
before they start one, and the load generator reads its workloads with them too.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from zerohop.workloads.errors import WorkloadError
from zerohop.workloads.kind_registry import workload_kind
from zerohop.workloads.yaml_io import load_workload_file

__all__ = ["check_inputs", "load_workloads"]


def load_workloads(files: Sequence[str | Path]) -> list[Any]:
    """Every workload spec in the given files, in order. A workload's name is what its
    records and its Locust user class are called, so it must be unique over all the
    files (WorkloadError names the file and field, or both files of a duplicate)."""
    specs: list[Any] = []
    first_file: dict[str, Path] = {}
    for name in files:
        path = Path(name)
        if not path.exists():
            raise WorkloadError(f"{path}: workload file not found")
        for spec in load_workload_file(path).workloads:
            if spec.name in first_file:
                raise WorkloadError(
                    f"{path}: duplicate workload name '{spec.name}' (also in "
                    f"{first_file[spec.name]}): names must be unique over all workload files")
            first_file[spec.name] = path
            specs.append(spec)
    return specs


def check_inputs(spec: Any) -> None:
    """What a spec points at must be readable before a run starts (a trace, a file of
    conversations): its kind's `check_inputs`, where it has one."""
    check = workload_kind(spec.kind).check_inputs
    if check is not None:
        check(spec)


def default_workload(kind: str, file: str | Path) -> Any:
    """The first workload of `kind` in a locustfile class's default file (a relative name
    is one of the shipped workloads/ files)."""
    default = Path(file)
    if not default.is_absolute():
        from zerohop.shipped import workloads_dir

        default = workloads_dir() / default
    specs = [s for s in load_workload_file(default).workloads if s.kind == kind]
    if not specs:
        raise WorkloadError(f"{default}: no workload of kind {kind!r}")
    return specs[0]
