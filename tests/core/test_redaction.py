"""Secret redaction (zerohop.core.redaction): credentials are masked wherever they
appear, token *counts* never are, and every writer uses this one rule."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from zerohop.client.protocols import HttpRequest
from zerohop.core import apis, redaction
from zerohop.core.layout import MANIFEST_FILE, SUMMARY_FILE
from zerohop.core.redaction import (
    REDACTED,
    is_secret_key,
    known_secrets,
    redact,
    redact_headers,
    scrub,
)
from zerohop.loadgen.log_scrub import ScrubbingFilter
from zerohop.report import environment
from zerohop.storage import run_folder, summary_file

pytestmark = pytest.mark.unit

SECRET_KEYS = [
    "api_key", "apiKey", "OPENAI_API_KEY", "x-api-key", "api-key", "Authorization",
    "proxy-authorization", "hf_token", "HF_TOKEN", "access_token", "accessToken", "token",
    "refresh_token", "x-auth-token", "MY_SERVICE_TOKEN", "password", "db_password",
    "passwd", "client_secret", "AWS_SECRET_ACCESS_KEY", "private_key", "cookie",
    "Set-Cookie", "basic_auth", "credentials", "bearer",
]
COUNT_AND_PLAIN_KEYS = [
    "max_tokens", "prompt_tokens", "output_tokens", "input_tokens", "max_output_tokens",
    "completion_tokens", "tokens_per_s", "tokens_per_event", "counted_output_tokens",
    "target_input_tokens", "token_ids", "prompt_token_ids", "token_source", "tokenizer",
    "TOKENIZERS_PARALLELISM", "api_key_env", "author", "PWD", "XAUTHORITY",
    "SSH_AUTH_SOCK", "anthropic-version", "x-request-id", "content-type", "model",
]


@pytest.mark.parametrize("key", SECRET_KEYS)
def test_credential_keys_are_secret(key: str) -> None:
    assert is_secret_key(key)
    assert redact({key: "value-123456"}) == {key: REDACTED}


@pytest.mark.parametrize("key", COUNT_AND_PLAIN_KEYS)
def test_counts_and_plain_settings_are_not_secret(key: str) -> None:
    assert not is_secret_key(key)
    assert redact({key: 256}) == {key: 256}
    assert redact({key: "llama"}) == {key: "llama"}


def test_a_nested_config_keeps_its_counts_and_loses_its_credentials() -> None:
    config = {
        "target": {"api": "openai-chat", "hf_token": "hf_abcdefghijklmnop",
                   "headers": {"Authorization": "Bearer xyz", "x-request-id": "r-1"}},
        "load": {"max_tokens": 256, "max_output_tokens": 64, "tokens_per_s": 12.5},
        "auth": False,
        "api_key": None,
        "servers": [{"password": "p", "prompt_tokens": 3}],
    }
    safe = redact(config)
    assert safe["target"] == {"api": "openai-chat", "hf_token": REDACTED,
                              "headers": {"Authorization": REDACTED, "x-request-id": "r-1"}}
    assert safe["load"] == config["load"]
    assert safe["auth"] is False and safe["api_key"] is None  # nothing there to hide
    assert safe["servers"] == [{"password": REDACTED, "prompt_tokens": 3}]
    assert config["target"]["hf_token"] == "hf_abcdefghijklmnop"  # input untouched


@pytest.mark.parametrize(("text", "expected"), [
    ("--api-key sk-sim-1 --max-tokens 100", f"--api-key {REDACTED} --max-tokens 100"),
    ("--hf-token=abc123 --max-output-tokens=9", f"--hf-token={REDACTED} --max-output-tokens=9"),
    ("['--token', 'abc123', '--tokens-per-s', '5']",
     f"['--token', '{REDACTED}', '--tokens-per-s', '5']"),
    ("https://user:pa55@gateway.example/v1", f"https://{REDACTED}@gateway.example/v1"),
    ("401 with header Bearer abcdefghijk", f"401 with header Bearer {REDACTED}"),
    ("invalid key sk-openai-SECRET-4f1c9e given", f"invalid key {REDACTED} given"),
    ("sk-abcdefghijklmnop", REDACTED),
    ("Basic dXNlcjpwYXNz", REDACTED),
    ("max_tokens=256 prompt_tokens=12", "max_tokens=256 prompt_tokens=12"),
])
def test_scrub_masks_secrets_inside_text(text: str, expected: str) -> None:
    assert scrub(text) == expected


@pytest.mark.parametrize("text", [
    "task-runner-abcdefghijklmnopq failed", "short-query", "-u 2 -r 2", "a@b.example",
    "mask-hf_abcdefghijklmnopqrstuvwxyz",
])
def test_scrub_leaves_lookalikes_alone(text: str) -> None:
    assert scrub(text) == text


def test_a_plain_flag_does_not_shield_the_secret_flag_after_it() -> None:
    assert scrub("--verbose --api-key k123 -t 3s") == f"--verbose --api-key {REDACTED} -t 3s"


def test_a_scrubbed_record_line_is_still_json() -> None:
    row = {"error_message": 'got "Bearer abcdefghijkl" from https://u:p@h/ "q"@x, '
                            'args --api-key \\"sk-x\\" --token=abc123',
           "url": "http://127.0.0.1:8000", "contact": "a@b.example",
           "max_tokens": 256}
    line = json.dumps(row, separators=(",", ":"))
    back = json.loads(scrub(line, ["abc123"]))
    assert back["url"] == row["url"] and back["contact"] == row["contact"]
    assert back["max_tokens"] == 256
    assert "abcdefghijkl" not in back["error_message"] and "u:p" not in back["error_message"]
    assert "abc123" not in back["error_message"]


def test_scrub_masks_known_secret_values_anywhere() -> None:
    assert scrub("error: key zh-sim-SECRET-93ab0c refused", ["zh-sim-SECRET-93ab0c"]) == (
        f"error: key {REDACTED} refused"
    )


def test_an_argv_list_loses_the_value_after_a_secret_flag() -> None:
    argv = ["--api-key", "plain-looking", "--max-tokens", "5", "--token=x1"]
    assert redact(argv) == ["--api-key", REDACTED, "--max-tokens", "5", f"--token={REDACTED}"]


def test_known_secrets_come_from_credential_variables_only() -> None:
    environ = {
        "OPENAI_API_KEY": "sk-openai-1234", "HF_TOKEN": "hf_abcdefghijkl",
        "DB_PASSWORD": "hunter22", "PWD": "/home/someone/work", "MAX_TOKENS": "123456",
        "TOKENIZERS_PARALLELISM": "false-ish", "ZEROHOP_API_KEY": "short",
    }
    assert known_secrets(environ) == ["hf_abcdefghijkl", "sk-openai-1234", "hunter22"]


def test_headers_are_masked_by_the_same_rule() -> None:
    headers = {"authorization": "Bearer k", "x-api-key": "k", "x-auth-token": "k",
               "x-request-id": "r", "anthropic-version": "2023-06-01"}
    assert redact_headers(headers) == {
        "authorization": REDACTED, "x-api-key": REDACTED, "x-auth-token": REDACTED,
        "x-request-id": "r", "anthropic-version": "2023-06-01",
    }
    shown = repr(HttpRequest("POST", "/v1/x", headers, b"{}"))
    assert "x-auth-token': '<redacted>'" in shown and "'x-request-id': 'r'" in shown


def test_every_writer_uses_the_one_routine() -> None:
    assert run_folder.redact is redaction.redact
    assert run_folder.scrub is redaction.scrub
    assert run_folder.known_secrets is redaction.known_secrets
    assert environment.redact is redaction.redact


def test_the_manifest_keeps_max_tokens_and_loses_the_token(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("HF_TOKEN", raising=False)
    run = run_folder.new_run_dir(tmp_path, "r")
    run_folder.start_manifest(run, name="r", config={
        "max_tokens": 256, "prompt_tokens": 12, "hf_token": "hf_abcdefghijklmnop",
        "sim_args": "--api-key zh-sim-SECRET-93ab0c --max-tokens 64",
    })
    config = run_folder.read_manifest(run)["config"]
    assert config["max_tokens"] == 256 and config["prompt_tokens"] == 12
    assert config["hf_token"] == REDACTED
    assert config["sim_args"] == f"--api-key {REDACTED} --max-tokens 64"


TOY_KEY_ENV = "TOYVENDOR_KEY"  # nothing in its words says credential
TOY_KEY = "tv-9f3a1c77e0b24d5e"


@pytest.fixture
def toy_vendor_api() -> Iterator[None]:
    """An API registered at run time whose key variable only the registry names."""
    entries, specs = dict(apis._ENTRIES), dict(apis._SPECS)
    spec = apis.ApiSpec("toy-vendor", chat_messages=True, takes_token_ids=False, tools=False,
                        structured_output=False, key_env=TOY_KEY_ENV)
    apis.register_api(apis.ApiEntry(
        spec, "zerohop.client.openai_adapters:OpenAIChatAdapter", "/v1/toy-vendor", "chat",
        "zerohop.sim.answers.answer_shapes:chat_shape", "vllm_chat_usage"))
    try:
        yield
    finally:
        for table, saved in ((apis._ENTRIES, entries), (apis._SPECS, specs)):
            table.clear()
            table.update(saved)


def test_a_registered_apis_key_is_masked_in_the_log_the_manifest_and_the_summary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, toy_vendor_api: None
) -> None:
    monkeypatch.setenv(TOY_KEY_ENV, TOY_KEY)
    assert not is_secret_key(TOY_KEY_ENV)  # only the registration makes it secret
    assert TOY_KEY_ENV in redaction.secret_env_names()
    echoed = f"401 from the server: key {TOY_KEY} refused"
    run = run_folder.new_run_dir(tmp_path, "r")

    log_path = run / "locust.log"
    handler = logging.FileHandler(log_path, encoding="utf-8")
    handler.addFilter(ScrubbingFilter())
    logger = logging.getLogger("zerohop.test.redaction")
    logger.addHandler(handler)
    logger.propagate = False  # this log file only
    try:
        logger.error("request failed: %s", echoed)
    finally:
        logger.removeHandler(handler)
        logger.propagate = True
        handler.close()
    run_folder.start_manifest(run, name="r", config={"note": echoed, "argv": [TOY_KEY]})
    summary_path = summary_file.write_document(run, {"errors": [{"message": echoed}]})

    written = {path.name: path.read_text(encoding="utf-8")
               for path in (log_path, run / MANIFEST_FILE, summary_path)}
    assert set(written) == {"locust.log", MANIFEST_FILE, SUMMARY_FILE}
    for name, text in written.items():
        assert "401 from the server" in text, name  # the line was written...
        assert TOY_KEY not in text, name  # ...without the key
        assert f"key {REDACTED} refused" in text, name
