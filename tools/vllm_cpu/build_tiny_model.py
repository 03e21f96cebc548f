"""Build the tiny random-weights Llama model that zerohop's vLLM CPU tests serve.

Run it with the vLLM venv's python (tools/vllm_cpu/setup_env.sh makes that venv):

    $VENV/bin/python tools/vllm_cpu/build_tiny_model.py OUT_DIR

Why build instead of download: nothing can be fetched from a model hub here, and a real
(if meaningless) model is enough to exercise a real continuous-batching engine: its
queue, KV cache, prefill/decode split, streaming and multi-LoRA.

What comes out (deterministic for a given --seed and --vocab-size):
- a byte-level BPE tokenizer (512 tokens, or --vocab-size: a few hundred is enough for
  a second tokenizer that counts the same text differently) trained on text generated
  below, with <s>/</s> and a simple chat template;
- a 2-layer Llama (hidden 128, 2 heads, 1 KV head -> head_dim 64; vLLM's CPU attention
  rejects head_dim 16), bfloat16, safetensors;
- LoRA adapters adapters/a0..a3 (r=8 on q_proj/v_proj, non-zero lora_B so each one
  really changes the output).

One trick keeps streams clean: every generated token decodes to non-empty ASCII text.
All embeddings carry a constant in one "bias" channel, and the output rows of tokens
that would decode to nothing or to a partial UTF-8 sequence (special tokens, high bytes)
read that channel with a large negative weight, so they are never sampled. Each token
then becomes exactly one non-empty content event, which keeps token counts checkable.

Idempotent: a complete OUT_DIR (build_info.json matching this builder's spec) is left
as it is; an incomplete one is rebuilt in a sibling temp folder and swapped in, under a
file lock so concurrent callers build it once.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BUILDER_VERSION = 2
DEFAULT_SEED = 20240601
ADAPTER_NAMES = ("a0", "a1", "a2", "a3")
BUILD_INFO_NAME = "build_info.json"

VOCAB_SIZE = 512
MIN_VOCAB_SIZE = 300
HIDDEN_SIZE = 128
NUM_HEADS = 2
NUM_KV_HEADS = 1
NUM_LAYERS = 2
INTERMEDIATE_SIZE = 256
MAX_POSITIONS = 4096
LORA_RANK = 8
LORA_ALPHA = 16

BOS, EOS, PAD = "<s>", "</s>", "<pad>"
ROLE_TOKENS = ("<|system|>", "<|user|>", "<|assistant|>")
CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% for message in messages %}"
    "<|{{ message['role'] }}|>\n{{ message['content'] }}{{ eos_token }}\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)
# The channel of the residual stream used as a constant "bias" input (see module doc).
BIAS_CHANNEL = 0
BIAS_EMBEDDING_VALUE = 1.0
BANNED_TOKEN_WEIGHT = -8.0


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(argv)
    # Nothing may reach for a model hub (none is reachable here, and a lookup is traffic).
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    out_dir: Path = args.out_dir.resolve()
    spec = build_spec(args.seed, args.vocab_size)
    if is_complete(out_dir, spec):
        print(f"tiny model already built at {out_dir}")
        return 0
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    # Two test sessions sharing the cache must not replace a model the other one serves.
    with (out_dir.parent / f".{out_dir.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if is_complete(out_dir, spec):
            print(f"tiny model built at {out_dir} by another process")
            return 0
        started_s = time.perf_counter()
        build(out_dir, spec)
    print(f"tiny model built at {out_dir} in {time.perf_counter() - started_s:.1f} s")
    return 0


def build_spec(seed: int, vocab_size: int = VOCAB_SIZE) -> dict[str, Any]:
    """Everything that determines the output; a change forces a rebuild."""
    return {
        "builder_version": BUILDER_VERSION,
        "seed": seed,
        "vocab_size": vocab_size,
        "hidden_size": HIDDEN_SIZE,
        "num_attention_heads": NUM_HEADS,
        "num_key_value_heads": NUM_KV_HEADS,
        "num_hidden_layers": NUM_LAYERS,
        "intermediate_size": INTERMEDIATE_SIZE,
        "max_position_embeddings": MAX_POSITIONS,
        "lora_rank": LORA_RANK,
        "adapters": list(ADAPTER_NAMES),
    }


def is_complete(out_dir: Path, spec: dict[str, Any]) -> bool:
    info_path = out_dir / BUILD_INFO_NAME
    try:
        info = json.loads(info_path.read_text())
    except (OSError, ValueError):
        return False
    return bool(info.get("spec") == spec)


def build(out_dir: Path, spec: dict[str, Any]) -> None:
    """Build into a temp sibling, then swap it in, so a crash never leaves half a model."""
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}-", dir=out_dir.parent))
    staging.chmod(0o755)
    try:
        seed, vocab_size = int(spec["seed"]), int(spec["vocab_size"])
        tokenizer = build_tokenizer(seed, vocab_size)
        tokenizer.save_pretrained(staging)
        build_base_model(tokenizer, seed, vocab_size).save_pretrained(
            staging, safe_serialization=True)
        for index, name in enumerate(ADAPTER_NAMES):
            build_adapter(staging, staging / "adapters" / name, seed=seed + 1 + index)
        info = {"spec": spec, "tokenizer_size": len(tokenizer)}
        (staging / BUILD_INFO_NAME).write_text(json.dumps(info, indent=2) + "\n")
        if out_dir.exists():
            shutil.rmtree(out_dir)
        staging.rename(out_dir)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)


def build_tokenizer(seed: int, vocab_size: int = VOCAB_SIZE) -> Any:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    specials = [PAD, BOS, EOS, *ROLE_TOKENS]
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=specials,
        # All 256 bytes stay encodable, so any prompt text tokenizes without loss.
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(generate_corpus(seed), trainer=trainer)
    bos_id = tokenizer.token_to_id(BOS)
    tokenizer.post_processor = processors.TemplateProcessing(
        single=f"{BOS} $A", pair=f"{BOS} $A {BOS} $B", special_tokens=[(BOS, bos_id)]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        bos_token=BOS,
        eos_token=EOS,
        pad_token=PAD,
        additional_special_tokens=list(ROLE_TOKENS),
        chat_template=CHAT_TEMPLATE,
        model_max_length=MAX_POSITIONS,
        clean_up_tokenization_spaces=False,
    )


def generate_corpus(seed: int, *, lines: int = 6000) -> list[str]:
    """Pseudo-English, numbers, code and chat turns: enough to learn ~250 useful merges."""
    rng = random.Random(seed)
    words = _CORPUS_WORDS.split()
    corpus: list[str] = []
    for line_index in range(lines):
        kind = line_index % 5
        if kind == 3:
            corpus.append(_code_line(rng, words))
            continue
        count = rng.randint(4, 18)
        sentence = " ".join(rng.choice(words) for _ in range(count))
        if rng.random() < 0.3:
            sentence += f" {rng.randint(0, 9999)}"
        sentence = sentence[0].upper() + sentence[1:] + rng.choice(".!?,;:")
        if kind == 4:
            role = rng.choice(("system", "user", "assistant"))
            sentence = f"<|{role}|>\n{sentence}"
        corpus.append(sentence)
    return corpus


def _code_line(rng: random.Random, words: list[str]) -> str:
    name = rng.choice(words)
    other = rng.choice(words)
    templates = (
        f"def {name}_{other}(x, y=None):",
        f"    return {name}[{rng.randint(0, 99)}] + {other}",
        f'{{"{name}": {rng.randint(0, 999)}, "{other}": "{rng.choice(words)}"}}',
        f"for {name} in range({rng.randint(1, 64)}):",
        f"# {name} {other} ({rng.randint(1, 31)}/{rng.randint(1, 12)})",
    )
    return rng.choice(templates)


def build_base_model(tokenizer: Any, seed: int, vocab_size: int = VOCAB_SIZE) -> Any:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=HIDDEN_SIZE,
        intermediate_size=INTERMEDIATE_SIZE,
        num_hidden_layers=NUM_LAYERS,
        num_attention_heads=NUM_HEADS,
        num_key_value_heads=NUM_KV_HEADS,
        head_dim=HIDDEN_SIZE // NUM_HEADS,
        max_position_embeddings=MAX_POSITIONS,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=False,
        torch_dtype="bfloat16",
    )
    model = LlamaForCausalLM(config)
    with torch.no_grad():
        model.model.embed_tokens.weight[:, BIAS_CHANNEL] = BIAS_EMBEDDING_VALUE
        lm_head = model.lm_head.weight
        lm_head[:, BIAS_CHANNEL] = 0.0
        for token_id in unsampleable_token_ids(tokenizer, vocab_size):
            lm_head[token_id, BIAS_CHANNEL] = BANNED_TOKEN_WEIGHT
    return model.to(torch.bfloat16)


def unsampleable_token_ids(tokenizer: Any, vocab_size: int = VOCAB_SIZE) -> list[int]:
    """Ids whose text is empty, a control byte or partial UTF-8; ids past the tokenizer."""
    banned = set(tokenizer.all_special_ids)
    for token_id in range(len(tokenizer)):
        text = tokenizer.decode([token_id], skip_special_tokens=True)
        if not text or not all(_is_plain_ascii(char) for char in text):
            banned.add(token_id)
    banned.update(range(len(tokenizer), vocab_size))
    return sorted(banned)


def _is_plain_ascii(char: str) -> bool:
    return char.isascii() and (char.isprintable() or char in "\n\t")


def build_adapter(base_dir: Path, adapter_dir: Path, *, seed: int) -> None:
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import LlamaForCausalLM

    torch.manual_seed(seed)
    base = LlamaForCausalLM.from_pretrained(base_dir, torch_dtype=torch.float32)
    config = LoraConfig(
        r=LORA_RANK,
        lora_alpha=LORA_ALPHA,
        target_modules=["q_proj", "v_proj"],
        lora_dropout=0.0,
        bias="none",
        task_type="CAUSAL_LM",
    )
    model = get_peft_model(base, config)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "lora_B" in name:
                # peft starts lora_B at zero (a no-op adapter); make it really change things.
                parameter.normal_(mean=0.0, std=0.5)
    # The staging path would leak into adapter_config.json; name the served base instead.
    model.peft_config["default"].base_model_name_or_path = "tiny"
    model.save_pretrained(adapter_dir, safe_serialization=True, save_embedding_layers=False)


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", type=Path, help="folder to write the model into")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help="random seed")
    parser.add_argument("--vocab-size", type=int, default=VOCAB_SIZE,
                        help=f"tokens in the tokenizer and the model's vocabulary (at least "
                             f"{MIN_VOCAB_SIZE}: the 256 bytes, the special tokens and a few "
                             f"merges)")
    args = parser.parse_args(argv)
    if args.vocab_size < MIN_VOCAB_SIZE:
        parser.error(f"--vocab-size must be >= {MIN_VOCAB_SIZE}")
    return args


# Plain words written for this builder: common English, serving and benchmark terms.
_CORPUS_WORDS = """
the a an and or but of to in on at for with from by as is are was were be been being
it this that these those there here what which who when where why how all any each
every some many much more most few less least one two three four five six seven eight
nine ten first second last next new old good great small large long short high low
fast slow early late right left same other own only just also very still even again
time day night year week hour minute second moment today now then soon always never
people person user model server client request response token tokens stream batch
queue cache memory latency throughput prompt output input text word line page file
engine kernel layer head attention prefill decode sample sampling temperature window
load test bench benchmark report metric value count rate ratio percent median mean
gateway proxy router network socket packet byte bytes buffer thread process worker
run runs running start stop wait send sends read write open close make made take
give gives find found know knows think see look use used work works call calls try
go goes come came get got keep kept let put say said tell ask asked show shows help
water light sound voice color green blue red white black river mountain city road
house garden table window door book story song music paper letter number question
answer reason result problem system program question order group point place part
"""


if __name__ == "__main__":
    sys.exit(main())
