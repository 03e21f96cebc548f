"""The sim's body forms are registry entries (sim/answers/body_forms.py): the shipped four are
there, a name is refused twice, an unknown one lists the known ones, and no sim module
compares a form's name any more (the readers live in the entries)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from zerohop.sim.answers import body_forms
from zerohop.sim.answers.body_forms import BodyForm, body_form, body_form_names, register_body_form

pytestmark = pytest.mark.unit

SIM = Path(body_forms.__file__).parent
SHIPPED = ("chat", "completions", "messages", "responses")
# `api == "chat"`, `form != "messages"`, `api in ("chat", ...)`: a branch on a form's name
_NAMES = "|".join(SHIPPED)
_BRANCH = re.compile(r"""\b(?:api|form)\s*(?:==|!=|(?:not\s+)?in)\s*\(?\s*["'](?:"""
                     + _NAMES + r""")["']""")


def test_the_shipped_forms_are_registered_and_a_name_is_taken_once() -> None:
    assert body_form_names()[:4] == SHIPPED
    chat = body_form("chat")
    with pytest.raises(ValueError, match="'chat' is already registered"):
        register_body_form(BodyForm("chat", chat.prompt_tokens, chat.prompt_ids))
    with pytest.raises(ValueError, match=r"reads no 'lines' body; it reads chat, completions"):
        body_form("lines")
    assert body_form("messages").overload_status == 529
    assert body_form("completions").answer is None


def test_no_sim_module_branches_on_a_body_forms_name() -> None:
    found = [f"{path.name}:{number}: {line.strip()}"
             for path in sorted(SIM.rglob("*.py")) if path.name != "builtin_forms.py"
             for number, line in enumerate(path.read_text().splitlines(), 1)
             if _BRANCH.search(line)]
    assert found == [], "read the form's entry (sim/answers/body_forms.py) instead"


def test_the_scan_sees_a_branch() -> None:
    assert _BRANCH.search('    if api == "messages":')
    assert _BRANCH.search('    if form not in ("chat", "completions"):')
    assert not _BRANCH.search('    api = "chat"  # the body form of this shape')
