"""Secret redaction: the one rule for what is a secret, used by everything that writes.

The manifest, the record lines, the report and the repr of an HTTP request all pass
through here, so they agree on what is masked. A key is secret by its words, not by a
substring: `hf_token`, `access_token`, `x-api-key`, `Authorization` and `db_password`
are credentials; `max_tokens`, `prompt_tokens`, `tokens_per_s` and `tokenizer` are not,
and a report that masked them would hide the run's configuration.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from typing import Any

from zerohop.core.apis import APIS

__all__ = [
    "OVERRIDE_KEY_ENV",
    "REDACTED",
    "is_secret_key",
    "known_secrets",
    "redact",
    "redact_headers",
    "scrub",
    "secret_env_names",
]

REDACTED = "***"
OVERRIDE_KEY_ENV = "ZEROHOP_API_KEY"  # read before any API's own key variable
# shorter environment values ("1", "true", "off") would mask innocent text everywhere
MIN_SECRET_CHARS = 6

# a word of a key: camelCase and ALLCAPS runs split, separators dropped
_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
# a word ending so is a secret wherever it stands in the key (client_secret, dbPassword)
_SECRET_WORD_ENDINGS = (
    "password", "passwd", "passphrase", "secret", "apikey", "credential", "credentials",
)
_SECRET_WORDS = frozenset({"authorization", "cookie", "bearer"})
# secret only as the key's last word: `hf_token`, `basic_auth` (`token_ids` is not)
_SECRET_LAST_WORD_ENDINGS = ("token",)
_SECRET_LAST_WORDS = frozenset({"auth"})
# secret as the key's last two words: `x-api-key`, `private_key` (`api_key_env` is not)
_SECRET_LAST_PAIRS = frozenset({
    ("api", "key"), ("api", "keys"), ("private", "key"), ("access", "key"),
    ("signing", "key"), ("encryption", "key"), ("session", "id"),
})

# values that are secrets whatever their key
_SECRET_VALUE = re.compile(
    r"sk-[A-Za-z0-9_\-]{8,}|(?:bearer|basic)\s+\S+|hf_[A-Za-z0-9]{10,}", re.IGNORECASE
)
# ...and their shapes inside longer text, e.g. an error message that echoes a header.
# No pattern takes a quote or a backslash, so a masked JSON line stays valid JSON.
_BEARER = re.compile(r"(?P<prefix>bearer\s+)[A-Za-z0-9._~+/=\-]{8,}", re.IGNORECASE)
_KEY_SHAPES = (re.compile(r"sk-[A-Za-z0-9_\-]{16,}"), re.compile(r"hf_[A-Za-z0-9]{20,}"))
_URL_USERINFO = re.compile(r"://[^/@\s\"'\\]+@")
# a flag and its value inside a command line, or inside the repr of an argv list:
# `--api-key X`, `--hf-token=X`, `['--token', 'X']`. The name is found first, and only a
# secret one takes its value, so a plain flag never swallows the secret flag after it.
_FLAG_NAME = re.compile(r"--?[A-Za-z][\w-]*")
_FLAG_VALUE = re.compile(r"(?:=|\s+|',\s*'|\",\s*\")(?P<value>[^\s'\",\\]+)")


def is_secret_key(key: str) -> bool:
    """Whether a config key, header or environment variable name holds a credential."""
    words = [w.lower() for w in _WORD.findall(key)]
    if not words:
        return False
    if any(w in _SECRET_WORDS or w.endswith(_SECRET_WORD_ENDINGS) for w in words):
        return True
    last = words[-1]
    if last in _SECRET_LAST_WORDS or last.endswith(_SECRET_LAST_WORD_ENDINGS):
        return True
    return len(words) >= 2 and (words[-2], last) in _SECRET_LAST_PAIRS


def secret_env_names() -> tuple[str, ...]:
    """The variables zerohop reads an API key from: ZEROHOP_API_KEY and every registered
    API's `key_env`, read from the registry at each call, so an API registered at run
    time is covered whatever its variable is called (`TOYVENDOR_KEY` says nothing of a
    credential by its words)."""
    return tuple(dict.fromkeys([OVERRIDE_KEY_ENV, *(spec.key_env for spec in APIS.values())]))


def known_secrets(environ: Mapping[str, str] = os.environ) -> list[str]:
    """Values that must never be written: the API keys zerohop reads, and any other
    variable whose name says it holds a credential. Longest first, so a secret that
    contains another is masked whole."""
    values = {environ.get(name, "") for name in secret_env_names()}
    values |= {v for k, v in environ.items() if is_secret_key(k)}
    return sorted((v for v in values if len(v) >= MIN_SECRET_CHARS), key=len, reverse=True)


def redact(value: Any, secrets: Iterable[str] = ()) -> Any:
    """A copy of a config value with secret-named keys, secret-looking values and the
    given known secret values masked. The input is not modified."""
    return _redact(value, list(secrets))


def redact_headers(headers: Mapping[str, str], marker: str = REDACTED) -> dict[str, str]:
    """A copy of HTTP headers safe for logs and reprs: credential headers masked."""
    return {k: (marker if is_secret_key(k) else v) for k, v in headers.items()}


def scrub(text: str, secrets: Iterable[str] = ()) -> str:
    """`text` with secret-looking values, secret flags' values, URL passwords and the
    given known secrets masked."""
    if _SECRET_VALUE.fullmatch(text.strip()):
        return REDACTED
    # every record line passes here: each pattern runs only where its marker is present
    if "-" in text:
        text = _mask_secret_flags(text)
    if "@" in text:
        text = _URL_USERINFO.sub(f"://{REDACTED}@", text)
    if "earer" in text or "EARER" in text:
        text = _BEARER.sub(lambda m: _unless_inside_word(m, m["prefix"] + REDACTED), text)
    for shape in _KEY_SHAPES:
        text = shape.sub(lambda m: _unless_inside_word(m, REDACTED), text)
    for secret in secrets:
        if secret and secret in text:
            text = text.replace(secret, REDACTED)
    return text


def _redact(value: Any, secrets: list[str]) -> Any:
    if isinstance(value, Mapping):
        return {
            str(k): (_masked(v) if is_secret_key(str(k)) else _redact(v, secrets))
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        out: list[Any] = []
        value_of_secret_flag = False
        for item in value:  # an argv list: ["--api-key", "X"] masks "X"
            out.append(_masked(item) if value_of_secret_flag else _redact(item, secrets))
            value_of_secret_flag = _is_bare_secret_flag(item)
        return out
    if isinstance(value, str):
        return scrub(value, secrets)
    return value


def _masked(value: Any) -> Any:
    """REDACTED in place of a secret's value; an absent value (None, "") or a yes/no
    flag stays, since it says something useful and holds nothing secret."""
    if value is None or value == "" or isinstance(value, bool):
        return value
    return REDACTED


def _is_bare_secret_flag(item: object) -> bool:
    return (isinstance(item, str) and item.startswith("-") and "=" not in item
            and is_secret_key(item.lstrip("-")))


def _unless_inside_word(match: re.Match[str], masked: str) -> str:
    """`masked`, unless the match starts inside a word (`task-...` is no `sk-` key)."""
    start = match.start()
    return match[0] if start and _is_word_char(match.string[start - 1]) else masked


def _is_word_char(char: str) -> bool:
    return char.isalnum() or char in "_-"


def _mask_secret_flags(text: str) -> str:
    parts: list[str] = []
    done = 0
    for name in _FLAG_NAME.finditer(text):
        start = name.start()
        if start < done or (start and _is_word_char(text[start - 1])):
            continue  # inside a word (`short-query`) or a value already masked
        if not is_secret_key(name[0].lstrip("-")):
            continue
        value = _FLAG_VALUE.match(text, name.end())
        if value is None:
            continue
        parts += [text[done:value.start("value")], REDACTED]
        done = value.end("value")
    return "".join(parts) + text[done:] if parts else text
