"""The shipped folders in a checkout: found through the package (importlib.resources) as
the checkout's own top-level folders, one copy of each file, and `zerohop locustfile`
pointing Locust at them."""

from __future__ import annotations

import ast
import hashlib
from pathlib import Path

import pytest
from click.testing import CliRunner

from zerohop import shipped
from zerohop.cli.locustfile import locustfile_command
from zerohop.report.render import templates_dir
from zerohop.workloads.kind_registry import workload_kind, workload_kinds

KIND_CLASS_NAMES = {kind.name: kind.user_class for kind in workload_kinds()}

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("name", [shipped.LOADTESTS, shipped.WORKLOADS, shipped.REPORT_TEMPLATES])
def test_an_editable_install_finds_the_checkouts_own_folders(name: str) -> None:
    assert shipped.folder(name).resolve() == (REPO / name).resolve()


def test_no_second_copy_of_a_shipped_file_in_the_package_source() -> None:
    def digests(root: Path) -> dict[str, Path]:
        return {hashlib.sha256(p.read_bytes()).hexdigest(): p for p in root.rglob("*")
                if p.is_file() and "__pycache__" not in p.parts}

    in_src = digests(REPO / "src")
    for name in (shipped.LOADTESTS, shipped.WORKLOADS, shipped.REPORT_TEMPLATES):
        copies = {str(in_src[d]) for d in digests(REPO / name).keys() & in_src.keys()}
        assert not copies, f"{name}/ files copied into src: {sorted(copies)}"


def test_report_templates_come_from_the_package_unless_overridden(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ZEROHOP_REPORT_TEMPLATES", raising=False)
    assert templates_dir() == shipped.report_templates_dir()
    (tmp_path / "report.html.j2").write_text("x")
    monkeypatch.setenv("ZEROHOP_REPORT_TEMPLATES", str(tmp_path))
    assert templates_dir() == tmp_path


def test_every_workload_kind_has_its_locustfile_with_its_class() -> None:
    for kind, class_name in KIND_CLASS_NAMES.items():
        (path,) = shipped.locustfiles([kind])
        tree = ast.parse(path.read_text())
        classes = {node.name for node in tree.body if isinstance(node, ast.ClassDef)}
        assert class_name in classes, (path, classes)


def test_the_default_files_are_written_once() -> None:
    """`zerohop run` sizes -u from each kind's default file without importing Locust,
    and the locustfiles' classes take theirs from the same table: no locustfile keeps a
    copy of `default_workload_file` or `runs_by_default` that could drift from it."""
    default_files = {kind.name: kind.default_file for kind in workload_kinds()}
    assert set(default_files) == set(KIND_CLASS_NAMES)
    assert {kind.name for kind in workload_kinds() if kind.runs_by_default} <= set(
        KIND_CLASS_NAMES)
    for kind, class_name in KIND_CLASS_NAMES.items():
        (path,) = shipped.locustfiles([kind])
        (cls,) = [node for node in ast.parse(path.read_text()).body
                  if isinstance(node, ast.ClassDef) and node.name == class_name]
        assigned = {target.id for node in cls.body
                    if isinstance(node, ast.Assign) for target in node.targets
                    if isinstance(target, ast.Name)}
        assert not assigned & {"default_workload_file", "runs_by_default"}, path
        assert (shipped.workloads_dir() / workload_kind(kind).default_file).is_file(), kind


def test_locustfile_prints_the_folder_or_the_named_files() -> None:
    runner = CliRunner()
    res = runner.invoke(locustfile_command, [])
    assert res.exit_code == 0, res.output
    assert Path(res.output.strip()) == shipped.loadtests_dir()
    res = runner.invoke(locustfile_command, ["--only", "LoRAMix", "--only", "TraceReplay"])
    assert res.exit_code == 0, res.output
    folder = shipped.loadtests_dir()
    assert res.output.strip().split(",") == [str(folder / "lora_mix.py"),
                                             str(folder / "trace_replay.py")]


def test_a_missing_shipped_package_is_one_line() -> None:
    with pytest.raises(shipped.ShippedFilesError,
                       match=r"zerohop\.shipped\.nowhere is not installed"):
        shipped.folder("nowhere")
