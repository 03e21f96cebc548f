"""The one list of API names (zerohop.core.apis): the table itself, and a scan of the
package that fails when a second literal list of the names appears anywhere else."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import get_args

import pytest

from zerohop.core.apis import API_NAMES, APIS, DEFAULT_API, ApiName, api_spec

pytestmark = pytest.mark.unit

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "zerohop"
HOME = "core/apis.py"
# Lists in folders this change did not edit; each entry goes when its list is replaced
# by an import from zerohop.core.apis (the test then asks for the entry's removal).
PENDING: dict[str, int] = {}


def api_name_lists(source: str) -> list[int]:
    """Lines of the tuple, list, set or dict-key literals (a `Literal[...]`'s arguments
    included) that hold two or more API names."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Tuple | ast.List | ast.Set):
            elements = list(node.elts)
        elif isinstance(node, ast.Dict):
            elements = [key for key in node.keys if key is not None]
        else:
            continue
        names = {e.value for e in elements
                 if isinstance(e, ast.Constant) and e.value in API_NAMES}
        if len(names) >= 2:
            lines.append(node.lineno)
    return lines


def package_api_name_lists() -> dict[str, list[int]]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).as_posix()
        if relative == HOME:
            continue
        lines = api_name_lists(path.read_text(encoding="utf-8"))
        if lines:
            found[relative] = lines
    return found


def test_no_second_list_of_api_names_in_the_package() -> None:
    found = package_api_name_lists()
    new = {f: lines for f, lines in found.items() if len(lines) > PENDING.get(f, 0)}
    assert not new, (
        f"API names listed outside {HOME}: {new}; use API_NAMES / ApiName / APIS from "
        "zerohop.core.apis instead"
    )
    fixed = sorted(set(PENDING) - set(found))
    assert not fixed, f"no list left in {fixed}: remove them from PENDING"


@pytest.mark.parametrize("source", [
    'API = Literal["openai-chat", "openai-completions", "anthropic"]',
    'x = click.Choice(["openai-chat", "anthropic"])',
    'CHAT = ("openai-chat", "anthropic")',
    'if api in {"openai-completions", "anthropic"}: pass',
    'KEYS = {"openai-chat": 1, "anthropic": 2}',
    'def f(api=("x", ("openai-chat", "openai-completions"))): pass',
])
def test_the_scan_sees_every_shape_of_list(source: str) -> None:
    assert len(api_name_lists(source)) == 1


@pytest.mark.parametrize("source", [
    'api = "openai-chat"',
    'if api == "openai-completions": pass',
    'x = ("openai-chat", "chat", "messages")',
    'help = "openai-chat, openai-completions or anthropic"',
])
def test_the_scan_lets_single_names_through(source: str) -> None:
    assert api_name_lists(source) == []


def test_the_table_holds_every_name_once_in_order() -> None:
    assert get_args(ApiName) == API_NAMES
    assert tuple(APIS) == API_NAMES
    assert all(APIS[name].name == name for name in API_NAMES)
    assert DEFAULT_API in API_NAMES


def test_each_api_takes_its_own_prompt_form() -> None:
    assert api_spec("openai-completions").takes_token_ids
    assert not api_spec("openai-completions").chat_messages
    for chat in ("openai-chat", "anthropic"):
        assert api_spec(chat).chat_messages and not api_spec(chat).takes_token_ids
    assert api_spec("anthropic").key_env == "ANTHROPIC_API_KEY"
    assert api_spec("openai-chat").key_env == api_spec("openai-completions").key_env


def test_an_unknown_api_names_the_valid_ones() -> None:
    with pytest.raises(ValueError) as raised:
        api_spec("openai")
    assert str(raised.value) == (
        "api: unknown API 'openai'; valid: openai-chat, openai-completions, anthropic, "
        "openai-responses"
    )
