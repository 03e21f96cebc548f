"""Before any load: does anything answer at the URL (`check_reachable`, exit 3), and is
it an LLM server at all (`check_llm_target`)? `zerohop run` and a plain Locust run of
`loadtests/` both ask. A URL that answers HTTP but serves no LLM API (a static file
server, a web app, a base URL with a wrong path) would otherwise start a run whose every
request fails, or fail inside Locust with a traceback; here it is one line and exit 2,
with nothing written.

Two looks, neither of which generates a token: `GET /v1/models` (a JSON model list)
and a `POST` of an empty JSON object to the API's endpoint (an LLM server rejects it
with a JSON error or a 4xx that says what is missing; a server without the endpoint
answers 404/405/501 with a page, not JSON). The target is refused only when both
looks find no API."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass

from zerohop.client.api_adapters import create_api_adapter
from zerohop.client.protocols import GenerationRequest
from zerohop.core.exit_codes import EXIT_BAD_INPUT, EXIT_UNREACHABLE, RunError

TIMEOUT_S = 5.0
NO_ENDPOINT = (404, 405, 501)  # what a server without the path answers


@dataclass(frozen=True)
class Answer:
    status: int
    json: object | None  # the body, when it parsed as JSON

    def describe(self) -> str:
        return f"HTTP {self.status}" + ("" if self.json is not None else " (not JSON)")


def check_target(host: str, api: str) -> None:
    """Both checks, in order: something answers (exit 3), and it is an LLM server (2)."""
    check_reachable(host)
    check_llm_target(host, api)


def check_reachable(host: str) -> None:
    """Exit 3 early, with one line, when nothing answers at the host (a `user:pass@`
    in the URL is not part of the address urllib would look up)."""
    parts = urllib.parse.urlsplit(host)
    address = parts._replace(netloc=parts.netloc.rpartition("@")[2]).geturl()
    for path in ("/health", "/v1/models", "/"):
        try:
            with urllib.request.urlopen(address.rstrip("/") + path, timeout=TIMEOUT_S):
                return
        except urllib.error.HTTPError:
            return  # something answers HTTP: reachable
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            last = f"{host} is unreachable: {reason}"
            if isinstance(reason, ConnectionRefusedError | TimeoutError):
                raise RunError(last, EXIT_UNREACHABLE) from None
    raise RunError(last, EXIT_UNREACHABLE)


def check_llm_target(host: str, api: str) -> None:
    """RunError (exit 2) when `host` serves HTTP but no LLM API (see the module)."""
    base = host.rstrip("/")
    models = _ask(urllib.request.Request(base + "/v1/models"))
    if models is None or _lists_models(models) or models.status in (401, 403):
        return
    path = api_path(api)
    post = _ask(urllib.request.Request(base + path, data=b"{}", method="POST",
                                       headers={"Content-Type": "application/json"}))
    if post is None or post.json is not None or post.status not in NO_ENDPOINT:
        return
    raise RunError(
        f"{host} serves HTTP but no LLM API: GET /v1/models answered {models.describe()}, "
        f"POST {path} {post.describe()}; is --host the server's base URL, and --api "
        "its API?", EXIT_BAD_INPUT)


def api_path(api: str) -> str:
    """The path the API's requests go to (/v1/chat/completions, /v1/messages, ...)."""
    probe = GenerationRequest(model="preflight", max_tokens=1, prompt=".")
    return create_api_adapter(api).build_request(probe, api_key=None, request_id="preflight").path


def _lists_models(answer: Answer) -> bool:
    body = answer.json
    return 200 <= answer.status < 300 and isinstance(body, dict) \
        and isinstance(body.get("data"), list)


def _ask(request: urllib.request.Request) -> Answer | None:
    """The status and JSON body of one request; None when no answer came (the
    reachability check has already judged the connection)."""
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as resp:
            return Answer(resp.status, _json(resp.read()))
    except urllib.error.HTTPError as exc:
        return Answer(exc.code, _json(exc.read()))
    except (urllib.error.URLError, OSError):
        return None


def _json(body: bytes) -> object | None:
    try:
        return json.loads(body)
    except ValueError:
        return None
