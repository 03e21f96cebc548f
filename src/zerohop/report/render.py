"""Jinja2 rendering of a self-contained page: templates from `report_templates/` (shipped
in the package as `zerohop.shipped.report_templates`), the chart library and the page
script embedded inline exactly once, data as escaped JSON, and a Content-Security-Policy
that allows only those scripts (by hash).

Autoescaping is on for every template, so any text from a run — error messages,
adapter names, config values — is shown as text. The only strings inserted unescaped
are the vendored assets and the chart JSON, each checked or encoded for that.
"""

from __future__ import annotations

import base64
import hashlib
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup

from zerohop.core.atomic_file import write_text_atomically
from zerohop.report.charts import Chart, encode_for_html
from zerohop.report.sections import template_loader

TEMPLATES_ENV = "ZEROHOP_REPORT_TEMPLATES"
STATIC_SCRIPTS: tuple[str, ...] = ("uPlot.iife.min.js", "report.js")
STATIC_STYLES: tuple[str, ...] = ("uPlot.min.css", "report.css")


class TemplatesNotFoundError(RuntimeError):
    """The report templates are not installed (or not where $ZEROHOP_REPORT_TEMPLATES says)."""


@dataclass(frozen=True)
class Assets:
    scripts: tuple[str, ...]
    style: str


def render_page(template_name: str, context: Mapping[str, Any], charts: Sequence[Chart]) -> str:
    """The finished HTML document for `template_name` with `context` and `charts`."""
    assets = load_assets()
    env = _environment(str(templates_dir()))
    script_hashes = [_csp_hash(script) for script in assets.scripts]
    csp = "; ".join(
        [
            "default-src 'none'",
            "script-src " + " ".join(f"'{h}'" for h in script_hashes),
            f"style-src '{_csp_hash(assets.style)}'",
            "img-src data:",
            "base-uri 'none'",
            "form-action 'none'",
        ]
    )
    payload = [chart.to_json() for chart in charts]
    return env.get_template(template_name).render(
        **context,
        csp=csp,
        inline_style=Markup(assets.style),
        inline_scripts=[Markup(script) for script in assets.scripts],
        chart_json=Markup(encode_for_html(payload)),
    )


def write_atomically(path: Path, text: str) -> Path:
    """Write via a temporary file and rename, so a reader never sees half a page; the
    page gets the mode the user's umask gives (core/atomic_file.py)."""
    return write_text_atomically(path, text)


def templates_dir() -> Path:
    """`$ZEROHOP_REPORT_TEMPLATES`, else the installed package's `report_templates/`."""
    from zerohop.shipped import ShippedFilesError, report_templates_dir

    override = os.environ.get(TEMPLATES_ENV)
    if override:
        if not (Path(override) / "report.html.j2").is_file():
            raise TemplatesNotFoundError(f"{TEMPLATES_ENV}={override}: no report.html.j2 there")
        return Path(override)
    try:
        shipped = report_templates_dir()
    except ShippedFilesError as exc:
        raise TemplatesNotFoundError(f"report templates not found: {exc}") from None
    if not (shipped / "report.html.j2").is_file():
        raise TemplatesNotFoundError(f"report templates not found: no report.html.j2 in {shipped}")
    return shipped


def load_assets() -> Assets:
    return _assets(str(templates_dir()))


@lru_cache(maxsize=4)
def _assets(root: str) -> Assets:
    static = Path(root) / "static"
    scripts = tuple((static / name).read_text(encoding="utf-8") for name in STATIC_SCRIPTS)
    for name, text in zip(STATIC_SCRIPTS, scripts, strict=True):
        if "</script" in text.lower():
            raise TemplatesNotFoundError(f"static/{name} contains '</script': cannot inline it")
    style = "\n".join((static / name).read_text(encoding="utf-8") for name in STATIC_STYLES)
    if "</style" in style.lower():
        raise TemplatesNotFoundError("a static stylesheet contains '</style': cannot inline it")
    return Assets(scripts=scripts, style=style)


@lru_cache(maxsize=4)
def _environment(root: str) -> jinja2.Environment:
    return jinja2.Environment(
        # the shipped templates, then those of sections registered from elsewhere
        loader=jinja2.ChoiceLoader([jinja2.FileSystemLoader(root), template_loader()]),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )


def _csp_hash(text: str) -> str:
    digest = hashlib.sha256(text.encode("utf-8")).digest()
    return "sha256-" + base64.b64encode(digest).decode("ascii")
