"""Write the tiny random-weights Llama GGUF that zerohop's llamacpp tier serves.

Run it with a python that has PyPI's `gguf` and `tokenizers` (the project's venv with
the `llamacpp` extra):

    python tools/llamacpp/build_tiny_gguf.py OUT.gguf

Why build instead of download: nothing can be fetched from a model hub here, and a real
(if meaningless) model is enough to exercise llama.cpp's server: its slots, KV cache,
prefill/decode, streaming, /tokenize and /metrics.

What comes out (byte for byte the same for a given --seed and --vocab-size):
- a byte-level BPE vocabulary (`tokenizer.ggml.model = "gpt2"`, GPT-2's pre-tokenizer)
  trained with `tokenizers` on the pseudo-English corpus the vLLM tier's model is trained
  on (tools/vllm_cpu/build_tiny_model.py), with <s>/</s>, role tokens and a chat template;
- a 2-layer Llama (hidden 128, 2 heads, 1 KV head), float32 weights drawn from a seeded
  normal distribution.

As in the vLLM tier's model, every token the model can sample decodes to non-empty ASCII
text: all embeddings carry a constant in one "bias" channel, and the output rows of
tokens that decode to nothing or to partial UTF-8 (special tokens, high bytes) read that
channel with a large negative weight. Each generated token is then one non-empty piece
of streamed text, and end-of-sequence is never sampled.

Idempotent: an OUT whose sidecar OUT.json names this builder's spec is left as it is;
otherwise it is written to a temp sibling and renamed, under a file lock.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "vllm_cpu"))
from build_tiny_model import generate_corpus

BUILDER_VERSION = 1
DEFAULT_SEED = 20240601
VOCAB_SIZE = 512
MIN_VOCAB_SIZE = 300
HIDDEN_SIZE = 128
NUM_HEADS = 2
NUM_KV_HEADS = 1
NUM_LAYERS = 2
INTERMEDIATE_SIZE = 256
CONTEXT_LENGTH = 16384  # the default long_context workload asks up to 8192 + 128
RMS_EPS = 1e-5
ROPE_BASE = 10000.0
WEIGHT_STD = 0.02

BOS, EOS, PAD = "<s>", "</s>", "<pad>"
ROLE_TOKENS = ("<|system|>", "<|user|>", "<|assistant|>")
# No {{ bos_token }}: llama.cpp adds the BOS itself to every prompt it tokenizes
# (tokenizer.ggml.add_bos_token), a template's own would make it two.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "<|{{ message['role'] }}|>\n{{ message['content'] }}{{ eos_token }}\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)
BIAS_CHANNEL = 0
BIAS_EMBEDDING_VALUE = 1.0
BANNED_TOKEN_WEIGHT = -8.0
TOKEN_TYPE_NORMAL, TOKEN_TYPE_CONTROL = 1, 3


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(argv)
    out: Path = args.out.resolve()
    spec = build_spec(args.seed, args.vocab_size)
    if is_complete(out, spec):
        print(f"tiny gguf already built at {out}")
        return 0
    out.parent.mkdir(parents=True, exist_ok=True)
    # Two test sessions sharing the cache must not replace a model the other one serves.
    with (out.parent / f".{out.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if is_complete(out, spec):
            print(f"tiny gguf built at {out} by another process")
            return 0
        started_s = time.perf_counter()
        build(out, spec)
    print(f"tiny gguf built at {out} in {time.perf_counter() - started_s:.1f} s")
    return 0


def build_spec(seed: int, vocab_size: int = VOCAB_SIZE) -> dict[str, Any]:
    """Everything that determines the output; a change forces a rebuild."""
    return {
        "builder_version": BUILDER_VERSION, "seed": seed, "vocab_size": vocab_size,
        "hidden_size": HIDDEN_SIZE, "num_heads": NUM_HEADS, "num_kv_heads": NUM_KV_HEADS,
        "num_layers": NUM_LAYERS, "intermediate_size": INTERMEDIATE_SIZE,
        "context_length": CONTEXT_LENGTH,
    }


def sidecar(out: Path) -> Path:
    return out.with_name(out.name + ".json")


def is_complete(out: Path, spec: dict[str, Any]) -> bool:
    try:
        info = json.loads(sidecar(out).read_text())
    except (OSError, ValueError):
        return False
    return bool(info.get("spec") == spec) and out.is_file()


def build(out: Path, spec: dict[str, Any]) -> None:
    """Write into a temp sibling, then rename it in, so a crash never leaves half a model."""
    seed, vocab_size = int(spec["seed"]), int(spec["vocab_size"])
    tokens, token_types, merges, special = train_vocabulary(seed, vocab_size)
    handle, staging_name = tempfile.mkstemp(prefix=f".{out.name}-", dir=out.parent)
    os.close(handle)
    staging = Path(staging_name)
    try:
        write_gguf(staging, tokens, token_types, merges, special, seed)
        staging.chmod(0o644)
        staging.rename(out)
    finally:
        staging.unlink(missing_ok=True)
    info = {"spec": spec, "tokens": len(tokens), "merges": len(merges)}
    sidecar(out).write_text(json.dumps(info, indent=2) + "\n")


def train_vocabulary(seed: int, vocab_size: int
                     ) -> tuple[list[str], list[int], list[str], dict[str, int]]:
    """(tokens, token types, merges "a b", special token ids) of a byte-level BPE trained
    on the shared corpus; the tokens are byte-level strings (`Ġ` for a space), as GGUF's
    gpt2 vocabulary wants them."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    specials = [PAD, BOS, EOS, *ROLE_TOKENS]
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=specials, show_progress=False,
        # All 256 bytes stay encodable, so any prompt text tokenizes without loss.
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tokenizer.train_from_iterator(generate_corpus(seed), trainer=trainer)
    model = json.loads(tokenizer.to_str())["model"]
    by_id = sorted(model["vocab"].items(), key=lambda item: item[1])
    if [token_id for _, token_id in by_id] != list(range(len(by_id))):
        raise RuntimeError("the trained vocabulary's ids are not 0..n-1")
    tokens = [token for token, _ in by_id]
    types = [TOKEN_TYPE_CONTROL if token in specials else TOKEN_TYPE_NORMAL for token in tokens]
    merges = [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]
    return tokens, types, merges, {token: tokens.index(token) for token in specials}


def write_gguf(path: Path, tokens: list[str], token_types: list[int], merges: list[str],
               special: dict[str, int], seed: int) -> None:
    import gguf

    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name("zerohop-tiny")
    writer.add_context_length(CONTEXT_LENGTH)
    writer.add_embedding_length(HIDDEN_SIZE)
    writer.add_block_count(NUM_LAYERS)
    writer.add_feed_forward_length(INTERMEDIATE_SIZE)
    writer.add_head_count(NUM_HEADS)
    writer.add_head_count_kv(NUM_KV_HEADS)
    writer.add_rope_dimension_count(HIDDEN_SIZE // NUM_HEADS)
    writer.add_rope_freq_base(ROPE_BASE)
    writer.add_layer_norm_rms_eps(RMS_EPS)
    writer.add_vocab_size(len(tokens))
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("gpt-2")
    writer.add_token_list(tokens)
    writer.add_token_types(token_types)
    writer.add_token_merges(merges)
    writer.add_bos_token_id(special[BOS])
    writer.add_eos_token_id(special[EOS])
    writer.add_pad_token_id(special[PAD])
    writer.add_add_bos_token(True)
    writer.add_add_eos_token(False)
    writer.add_chat_template(CHAT_TEMPLATE)
    for name, tensor in model_tensors(tokens, token_types, seed).items():
        writer.add_tensor(name, tensor)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def model_tensors(tokens: list[str], token_types: list[int], seed: int
                  ) -> dict[str, np.ndarray]:
    """The weights by GGUF tensor name, (out, in) as in a checkpoint, float32."""
    rng = np.random.default_rng(seed)
    head_dim = HIDDEN_SIZE // NUM_HEADS

    def normal(*shape: int) -> np.ndarray:
        return rng.normal(0.0, WEIGHT_STD, size=shape).astype(np.float32)

    vocab = len(tokens)
    ones = np.ones(HIDDEN_SIZE, dtype=np.float32)
    embedding = normal(vocab, HIDDEN_SIZE)
    embedding[:, BIAS_CHANNEL] = BIAS_EMBEDDING_VALUE
    output = normal(vocab, HIDDEN_SIZE)
    output[:, BIAS_CHANNEL] = 0.0
    output[unsampleable_ids(tokens, token_types), BIAS_CHANNEL] = BANNED_TOKEN_WEIGHT
    tensors = {"token_embd.weight": embedding, "output_norm.weight": ones.copy(),
               "output.weight": output}
    for layer in range(NUM_LAYERS):
        block = f"blk.{layer}"
        tensors |= {
            f"{block}.attn_norm.weight": ones.copy(),
            f"{block}.attn_q.weight": normal(NUM_HEADS * head_dim, HIDDEN_SIZE),
            f"{block}.attn_k.weight": normal(NUM_KV_HEADS * head_dim, HIDDEN_SIZE),
            f"{block}.attn_v.weight": normal(NUM_KV_HEADS * head_dim, HIDDEN_SIZE),
            f"{block}.attn_output.weight": normal(HIDDEN_SIZE, NUM_HEADS * head_dim),
            f"{block}.ffn_norm.weight": ones.copy(),
            f"{block}.ffn_gate.weight": normal(INTERMEDIATE_SIZE, HIDDEN_SIZE),
            f"{block}.ffn_up.weight": normal(INTERMEDIATE_SIZE, HIDDEN_SIZE),
            f"{block}.ffn_down.weight": normal(HIDDEN_SIZE, INTERMEDIATE_SIZE),
        }
    return tensors


def unsampleable_ids(tokens: list[str], token_types: list[int]) -> list[int]:
    """Special tokens and those whose bytes are not plain printable ASCII on their own."""
    byte_of = _byte_level_decoder()
    banned = []
    for token_id, (token, kind) in enumerate(zip(tokens, token_types, strict=True)):
        raw = bytes(byte_of[char] for char in token) if kind == TOKEN_TYPE_NORMAL else b""
        if not raw or not all(32 <= b < 127 or b in (9, 10) for b in raw):
            banned.append(token_id)
    return banned


def _byte_level_decoder() -> dict[str, int]:
    """GPT-2's byte-level alphabet: the printable character that stands for each byte."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1),
                 *range(ord("®"), ord("ÿ") + 1)]
    chars, shift = {}, 0
    for byte in range(256):
        if byte in printable:
            chars[chr(byte)] = byte
        else:
            chars[chr(256 + shift)] = byte
            shift += 1
    return chars


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("out", type=Path, help="the .gguf file to write")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help="random seed")
    parser.add_argument("--vocab-size", type=int, default=VOCAB_SIZE,
                        help=f"tokens in the vocabulary (at least {MIN_VOCAB_SIZE}: the 256 "
                             f"bytes, the special tokens and a few merges)")
    args = parser.parse_args(argv)
    if args.vocab_size < MIN_VOCAB_SIZE:
        parser.error(f"--vocab-size must be >= {MIN_VOCAB_SIZE}")
    return args


if __name__ == "__main__":
    sys.exit(main())
