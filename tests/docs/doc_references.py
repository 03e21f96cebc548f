"""What a doc names in the code, and whether the code still has it.

A doc's references are of four kinds, each found by a plain pattern:
- paths: `x/y.py` (relative to the checkout, to src/zerohop or to src/), `zerohop/x/y.py`,
  a bare `y.py` somewhere in the checkout, and in backticks a folder `x/` or a path under
  `tests/`, `loadtests/`, `src/`, `.ci/` or `tools/`;
- names after a module: `client/measure.build_record`, `sim.engine.Engine`,
  `measure.StreamDecode` (a module's own file name), `LagRecorder.add_written` (a class's
  member); the standard library's names and data quoted as dotted words (`DATA_WORDS`:
  `response.completed`, `usage.prompt_tokens`) are left alone, any other is reported;
- bare names in backticks that only code has: `ClassName`, `CONSTANT_NAME`;
- the results folder's file names (`requests.parquet`), against `core/layout.py`.
Names are looked up with `ast`, never by importing the product. Every problem is one line.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import fnmatch
import functools
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypeGuard

REPO = Path(__file__).resolve().parents[2]
SRC = REPO / "src" / "zerohop"
PATH_ROOTS = (REPO, SRC, REPO / "src")
PY_FOLDERS = ("src", "tests", "loadtests", "microbench", "tools")
TOP_FOLDERS = ("tests/", "loadtests/", "src/", ".ci/", "tools/")
RESULT_SUFFIXES = (".parquet", ".jsonl", ".json", ".html", ".log", ".csv")

# the first words of dotted names the docs quote that are data, not code: manifest keys
# (`load.duration_s`, `config.run_time`: Locust's, not sim/config.py) and API fields
DATA_WORDS = frozenset({
    "load", "config", "counters", "usage", "response", "output_item",
    "completion_tokens_details", "input_tokens_details", "output_tokens_details",
})
# file names the docs quote that are not in a results folder
NOT_RESULTS = frozenset({"tokenizer.json"})

PY_PATH = re.compile(r"(?<![\w./-])((?:[\w.*-]+/)*[\w*-]+\.py)(?![\w/])")
BACKTICKED = re.compile(r"`([^`\n]+)`")
IDENT = re.compile(r"[A-Za-z_]\w*")
CLASS_NAME = re.compile(r"_?[A-Z][A-Za-z0-9]*[a-z][A-Za-z0-9]*")
CONSTANT = re.compile(r"_?[A-Z][A-Z0-9]*_[A-Z0-9_]+")


def broken_references(text: str, doc: str) -> list[str]:
    """One line per reference in `text` (a doc called `doc`) that the code lacks."""
    problems: dict[str, None] = {}
    for path in PY_PATH.findall(text):
        if not _path_exists(path):
            problems[f"{doc}: `{path}`: no such file"] = None
    for token in BACKTICKED.findall(text):
        problem = _token_problem(token.split("(")[0].strip())
        if problem:
            problems[f"{doc}: `{token}`: {problem}"] = None
    return list(problems)


def _token_problem(token: str) -> str | None:
    if not token or " " in token or token.endswith(".py"):
        return None  # a command, data, or a path PY_PATH already checked
    if token.endswith(RESULT_SUFFIXES) and "/" not in token:
        known = token in layout_files() or token in NOT_RESULTS
        return None if known else "not a file of the results folder"
    if token.endswith("/") or token.startswith(TOP_FOLDERS):
        return None if _path_exists(token) else "no such path"
    if "/" in token:
        if _path_exists(token):
            return None  # `report_templates/report.html.j2`
        if (REPO / token.split("/")[0]).is_dir() and not (SRC / token.split("/")[0]).is_dir():
            return "no such path"
        *folders, last = token.split("/")
        module, _, names = last.partition(".")
        parts = [*folders, module]
        if not all(IDENT.fullmatch(p) for p in parts):
            return None  # `records/*.jsonl`, `/metrics`: not a module
        if _module_file(parts) is None:
            return "no such module"
        return _names_problem(parts, names.split(".") if names else [])
    if "." in token:
        if _path_exists(token):
            return None  # `pyproject.toml`
        return _dotted_problem(token.removeprefix("zerohop.").split("."))
    if CLASS_NAME.fullmatch(token) or CONSTANT.fullmatch(token):
        return None if token in defined_anywhere() else "defined nowhere in src/zerohop"
    return None


def _dotted_problem(parts: list[str]) -> str | None:
    if not all(IDENT.fullmatch(p) for p in parts) or parts[0] in DATA_WORDS:
        return None
    for cut in range(len(parts), 0, -1):  # the longest prefix that is a module
        if _module_file(parts[:cut]) is not None:
            return _names_problem(parts[:cut], parts[cut:])
    stems = module_stems().get(parts[0], [])
    if stems:  # `measure.build_record`: a module by its file name alone
        if any(_names_problem(m, parts[1:]) is None for m in stems):
            return None
        return _names_problem(stems[0], parts[1:])
    owners = [m for m, names in all_modules().items() if parts[0] in names.classes]
    if owners:  # `LagRecorder.add_written`
        if any(parts[1] in all_modules()[m].classes[parts[0]] for m in owners):
            return None
        return f"class {parts[0]} has no {parts[1]}"
    if parts[0] in sys.stdlib_module_names or hasattr(builtins, parts[0]):
        return None  # `time.perf_counter_ns`, `bytes.join`
    return f"{parts[0]} is no module or class of src/zerohop"


def _names_problem(module: list[str] | tuple[str, ...], names: list[str]) -> str | None:
    if not names:
        return None
    where = "/".join(module)
    defined = module_names(tuple(module))
    if names[0] not in defined.top:
        return f"{where} defines no {names[0]}"
    if len(names) > 1 and names[0] in defined.classes and names[1] not in defined.classes[names[0]]:
        return f"{where}.{names[0]} has no {names[1]}"
    return None


def _path_exists(path: str) -> bool:
    path = path.removeprefix("zerohop/").rstrip("/")
    if "/" not in path and path.endswith(".py"):
        return any(fnmatch.fnmatchcase(name, path) for name in py_file_names())
    roots = (SRC,) if path == "zerohop" else PATH_ROOTS
    return any(any(root.glob(path)) if "*" in path else (root / path).exists()
               for root in roots)


def _module_file(parts: list[str] | tuple[str, ...]) -> Path | None:
    base = SRC.joinpath(*parts)
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


class ModuleNames:
    """What a module defines: its top-level names and each class's members."""

    def __init__(self, tree: ast.Module) -> None:
        self.top: set[str] = set()
        self.classes: dict[str, set[str]] = {}
        for node in _top_level(tree.body):
            self.top.update(_defined(node))
            if isinstance(node, ast.ClassDef):
                self.classes[node.name] = {n for child in node.body for n in _defined(child)}
            if _is_all(node):
                with contextlib.suppress(ValueError):  # an `__all__` built by code
                    self.top.update(ast.literal_eval(node.value))


def _top_level(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    for node in body:
        yield node
        if isinstance(node, ast.If | ast.Try):
            yield from _top_level(node.body)
            yield from _top_level(node.orelse)


def _defined(node: ast.stmt) -> set[str]:
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return {node.name}
    targets: list[Any] = []
    if isinstance(node, ast.Assign):
        targets = node.targets
    elif isinstance(node, ast.AnnAssign):
        targets = [node.target]
    return {t.id for t in targets if isinstance(t, ast.Name)}


def _is_all(node: ast.stmt) -> TypeGuard[ast.Assign]:
    return (isinstance(node, ast.Assign) and any(
        isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets))


@functools.cache
def module_names(module: tuple[str, ...]) -> ModuleNames:
    path = _module_file(module)
    assert path is not None, module
    return ModuleNames(ast.parse(path.read_text(encoding="utf-8")))


@functools.cache
def all_modules() -> dict[tuple[str, ...], ModuleNames]:
    found = {}
    for path in sorted(SRC.rglob("*.py")):
        parts = path.relative_to(SRC).with_suffix("").parts
        module = parts[:-1] if parts[-1] == "__init__" else parts
        found[module] = module_names(module)
    return found


@functools.cache
def module_stems() -> dict[str, list[tuple[str, ...]]]:
    stems: dict[str, list[tuple[str, ...]]] = {}
    for module in all_modules():
        if module:
            stems.setdefault(module[-1], []).append(module)
    return stems


@functools.cache
def defined_anywhere() -> frozenset[str]:
    names: set[str] = set()
    for defined in all_modules().values():
        names |= defined.top
        for members in defined.classes.values():
            names |= members
    return frozenset(names)


@functools.cache
def py_file_names() -> frozenset[str]:
    return frozenset(p.name for folder in PY_FOLDERS for p in (REPO / folder).rglob("*.py"))


@functools.cache
def layout_constants() -> dict[str, Any]:
    return constants_of(("core", "layout"))


def layout_files() -> set[str]:
    """The results folder's files and folders, as `core/layout.py` names them."""
    return {value for name, value in layout_constants().items()
            if name.endswith(("_FILE", "_LOG", "_DIR"))}


def constants_of(module: tuple[str, ...]) -> dict[str, Any]:
    """A module's top-level names bound to a literal, with their values."""
    path = _module_file(module)
    assert path is not None, module
    values = {}
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            target, value = node.target, node.value
        else:
            continue
        if isinstance(target, ast.Name):
            try:
                values[target.id] = ast.literal_eval(value)
            except ValueError:
                continue
    return values


def results_section_problems(text: str, doc: str) -> list[str]:
    """The doc's results-folder section names every file `core/layout.py` names, and
    only those (`records/*.jsonl` for a folder)."""
    section = text.split("## The results folder", 1)[-1].split("\n## ", 1)[0]
    named = set()
    for token in BACKTICKED.findall(section):
        if token.endswith(RESULT_SUFFIXES):
            named.add(token.split("/")[0] if "/" in token else token)
    files = layout_files()
    stray = [f"{doc}: results folder: `{n}` is not in core/layout.py"
             for n in sorted(named - files)]
    missing = [f"{doc}: results folder: leaves out `{f}` (core/layout.py)"
               for f in sorted(files - named)]
    return stray + missing
