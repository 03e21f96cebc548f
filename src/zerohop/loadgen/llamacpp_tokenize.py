"""llama.cpp's server counts tokens in its own shapes; this turns a /tokenize request in
vLLM's shape into llama.cpp's and its answer back, so prompt sizing (tokenize_words.py)
reads one shape.

vLLM takes `{"model", "prompt", "add_special_tokens", "return_token_strs"}` or
`{"model", "messages", "add_generation_prompt"}` at POST /tokenize and answers
`{"count", "tokens", "max_model_len"[, "token_strs"]}`. llama.cpp's POST /tokenize takes
`{"content", "add_special", "with_pieces"}` and answers `{"tokens": [id, ...]}`, or with
pieces `{"tokens": [{"id", "piece"}, ...]}` (a piece that is not valid UTF-8 comes as a
list of byte values); a body without `content` gets `{"tokens": []}`, which is how a
vLLM-shaped request tells the two apart. It counts no messages there: a chat request is
counted whole, template and all, by POST /v1/chat/completions/input_tokens, which
answers `{"input_tokens": n}`. Both count as the generation endpoints do (the BOS a
completion gets; special tokens in the text parsed as such).
"""

from __future__ import annotations

from typing import Any

__all__ = ["CHAT_COUNT_PATH", "TOKENIZE_PATH", "is_llamacpp_answer", "llamacpp_request",
           "vllm_shaped_answer"]

TOKENIZE_PATH = "/tokenize"
CHAT_COUNT_PATH = "/v1/chat/completions/input_tokens"


def is_llamacpp_answer(answer: Any) -> bool:
    """Whether a /tokenize answer is llama.cpp's: token ids (or pieces) without a count."""
    return isinstance(answer, dict) and "count" not in answer \
        and isinstance(answer.get("tokens"), list)


def llamacpp_request(body: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """(path, body) that asks llama.cpp what the vLLM-shaped `body` asks."""
    if "messages" in body:
        chat = {"messages": body["messages"],
                "add_generation_prompt": body.get("add_generation_prompt", True)}
        if "model" in body:
            chat["model"] = body["model"]
        return CHAT_COUNT_PATH, chat
    return TOKENIZE_PATH, {"content": body.get("prompt", ""),
                           "add_special": bool(body.get("add_special_tokens", True)),
                           "with_pieces": bool(body.get("return_token_strs", False))}


def vllm_shaped_answer(path: str, answer: Any) -> dict[str, Any] | None:
    """llama.cpp's answer at `path` as vLLM would give it (no max_model_len: llama.cpp's
    /tokenize does not say); None when it is not the answer that path gives."""
    if not isinstance(answer, dict):
        return None
    if path == CHAT_COUNT_PATH:
        count = answer.get("input_tokens")
        if isinstance(count, bool) or not isinstance(count, int):
            return None
        return {"count": count}
    tokens = answer.get("tokens")
    if not isinstance(tokens, list):
        return None
    if all(isinstance(t, dict) for t in tokens):
        pieces = [_piece_text(t.get("piece")) for t in tokens]
        ids = [t.get("id") for t in tokens]
        if any(p is None for p in pieces) or not all(_is_int(i) for i in ids):
            return None
        return {"count": len(tokens), "tokens": ids, "token_strs": pieces}
    if not all(_is_int(t) for t in tokens):
        return None
    return {"count": len(tokens), "tokens": tokens}


def _piece_text(piece: Any) -> str | None:
    """A piece's text; byte values (part of a UTF-8 sequence) decoded with replacement."""
    if isinstance(piece, str):
        return piece
    if isinstance(piece, list) and all(_is_int(b) and 0 <= b < 256 for b in piece):
        return bytes(piece).decode("utf-8", errors="replace")
    return None


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
