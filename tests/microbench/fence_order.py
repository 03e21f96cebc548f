"""Is every acknowledgement fenced after the words it vouches for? Checked twice over.

The host reads a kernel's checksum (and the ring's totals) as soon as it sees the ack
word change, so a system-scope fence must sit BETWEEN the last of those payload stores
and the ack store; a fence anywhere else (after the ack, before the payload) lets the
host see the ack first. Two views of the same rule:

- `source_fence_problems(source)`: the CUDA C text of `zerohop.microbench.kernels`
  (comments stripped, statements in the same `{}` block): runs anywhere, no NVRTC;
- `ptx_fence_problems(ptx)`: the PTX NVRTC made of it (stores in the same basic block,
  addressed as base register + byte offset): what the hardware is actually told.

Each returns {kernel name: [problem, ...]} for every kernel that stores an ack, so a
caller can also check that the kernels it expects were found at all.
"""

from __future__ import annotations

import re

from zerohop.microbench.kernels import CTRL_ACK, CTRL_CHECKSUM, CTRL_PROCESSED, CTRL_TOTAL

ACK_NAME = "CTRL_ACK"
# What the host reads once it sees an ack (ring.py: the checksum per round trip, the
# totals after draining): each must be visible before the ack that covers it.
VOUCHED_NAMES = ("CTRL_CHECKSUM", "CTRL_TOTAL", "CTRL_PROCESSED")
ACK_OFFSET = CTRL_ACK * 8
VOUCHED_OFFSETS = tuple(word * 8 for word in (CTRL_CHECKSUM, CTRL_TOTAL, CTRL_PROCESSED))

# --- CUDA C source ------------------------------------------------------------------------
_KERNEL_HEAD = re.compile(r'extern\s+"C"\s+__global__\s+void\s+(\w+)\s*\(')
_ACK_STORE = re.compile(rf"\bctrl\s*\[\s*{ACK_NAME}\s*\]\s*=(?!=)")
_VOUCHED_STORE = re.compile(rf"\bctrl\s*\[\s*({'|'.join(VOUCHED_NAMES)})\s*\]\s*=(?!=)")
_FENCE_CALL = re.compile(r"__threadfence_system\s*\(\s*\)\s*;")


def strip_comments(code: str) -> str:
    """Comments become spaces (string literals do not occur in the kernels)."""
    code = re.sub(r"/\*.*?\*/", lambda m: " " * len(m.group(0)), code, flags=re.S)
    return re.sub(r"//[^\n]*", lambda m: " " * len(m.group(0)), code)


def kernel_bodies(source: str) -> dict[str, str]:
    """{name: text between the braces} of every `extern "C" __global__` kernel."""
    code = strip_comments(source)
    bodies: dict[str, str] = {}
    for head in _KERNEL_HEAD.finditer(code):
        start = code.index("{", head.end())
        depth = 0
        for pos in range(start, len(code)):
            if code[pos] == "{":
                depth += 1
            elif code[pos] == "}":
                depth -= 1
                if depth == 0:
                    bodies[head.group(1)] = code[start + 1 : pos]
                    break
        else:
            raise ValueError(f"kernel {head.group(1)}: unbalanced braces")
    return bodies


def _depth_walk(text: str) -> list[int]:
    """Brace depth before each character of `text`, relative to its start."""
    depths, depth = [], 0
    for ch in text:
        depths.append(depth)
        depth += (ch == "{") - (ch == "}")
    return depths


def _same_block(text: str) -> bool:
    """`text` neither leaves the block it starts in nor ends inside a nested one."""
    depth = 0
    for ch in text:
        depth += (ch == "{") - (ch == "}")
        if depth < 0:
            return False
    return depth == 0


def _is_statement_start(text: str, pos: int) -> bool:
    """Nothing but whitespace since the last `;`, `{` or `}`: not under an `if` or `else`."""
    before = text[:pos].rstrip()
    return not before or before[-1] in ";{}"


def _source_problems_of(body: str) -> list[str]:
    problems: list[str] = []
    vouched = list(_VOUCHED_STORE.finditer(body))
    for ack in _ACK_STORE.finditer(body):
        after = body[ack.end() :]
        depths_after = _depth_walk(after)
        block_end = next((i for i, d in enumerate(depths_after) if d < 0), len(after))
        for late in _VOUCHED_STORE.finditer(after[:block_end]):
            if depths_after[late.start()] == 0:
                problems.append(f"ctrl[{late.group(1)}] is stored after the ack it is read under")
        earlier = [v for v in vouched if v.end() <= ack.start()]
        if not earlier:
            problems.append(f"the ack store `{ack.group(0)} ...` has no payload store before it")
            continue
        last = earlier[-1]
        between = body[last.end() : ack.start()]
        depths = _depth_walk(between)
        if not _same_block(between):
            problems.append(f"ctrl[{last.group(1)}] and the ack are not in the same block")
            continue
        fenced = any(
            depths[f.start()] == 0 and _is_statement_start(between, f.start())
            for f in _FENCE_CALL.finditer(between)
        )
        if not fenced:
            problems.append(
                f"no __threadfence_system() between the store to ctrl[{last.group(1)}] "
                "and the ack store"
            )
    return problems


def source_fence_problems(source: str) -> dict[str, list[str]]:
    """{kernel: problems} for every kernel whose CUDA C stores `ctrl[CTRL_ACK]`."""
    return {
        name: _source_problems_of(body)
        for name, body in kernel_bodies(source).items()
        if _ACK_STORE.search(body)
    }


# --- PTX ------------------------------------------------------------------------------------
_PTX_ENTRY = re.compile(r"\.entry\s+(\w+)\s*\((.*?)\n}\n", re.S)
_PTX_FENCE = re.compile(r"^\s*(membar\.sys|fence\.(sc|acq_rel)\.sys)\s*;")
_PTX_STORE = re.compile(r"^\s*(@!?%p\d+\s+)?st\.[\w.]+\s+\[(%rd\d+)\+(\d+)\]")
_PTX_BLOCK_END = re.compile(r"^\s*(\$\w+:|(@!?%p\d+\s+)?(bra|ret|exit|brx)\b)")


def ptx_kernel_bodies(ptx: str) -> dict[str, str]:
    return {m.group(1): m.group(2) for m in _PTX_ENTRY.finditer(ptx)}


def _ptx_problems_of(body: str) -> list[str]:
    lines = body.splitlines()
    problems: list[str] = []
    for index, line in enumerate(lines):
        store = _PTX_STORE.match(line)
        if store is None or int(store.group(3)) != ACK_OFFSET:
            continue
        base = store.group(2)
        fenced = False
        for earlier in reversed(lines[:index]):
            if _PTX_FENCE.match(earlier):
                fenced = True
                continue
            prior = _PTX_STORE.match(earlier)
            if prior and prior.group(2) == base and int(prior.group(3)) in VOUCHED_OFFSETS:
                if not fenced:
                    problems.append(
                        f"no membar.sys between `{earlier.strip()}` and `{line.strip()}`"
                    )
                break
            if _PTX_BLOCK_END.match(earlier):
                problems.append(f"`{line.strip()}` has no payload store before it in its block")
                break
        else:
            problems.append(f"`{line.strip()}` has no payload store before it")
        for later in lines[index + 1 :]:
            if _PTX_BLOCK_END.match(later):
                break
            after = _PTX_STORE.match(later)
            if after and after.group(2) == base and int(after.group(3)) in VOUCHED_OFFSETS:
                problems.append(f"`{later.strip()}` is stored after the ack `{line.strip()}`")
    return problems


def ptx_fence_problems(ptx: str) -> dict[str, list[str]]:
    """{kernel: problems} for every PTX entry that stores to [base + ACK_OFFSET]."""
    result: dict[str, list[str]] = {}
    for name, body in ptx_kernel_bodies(ptx).items():
        stores = (_PTX_STORE.match(line) for line in body.splitlines())
        if any(s is not None and int(s.group(3)) == ACK_OFFSET for s in stores):
            result[name] = _ptx_problems_of(body)
    return result


# --- deliberately broken variants (the tests show each check fails on them) -----------------
_PAYLOAD_LINES = rf"(?:[ \t]*ctrl\[(?:{'|'.join(VOUCHED_NAMES)})\] = [^;]+;[^\n]*\n)+"
_FENCE_LINE = r"[ \t]*__threadfence_system\(\);[^\n]*\n"
_ACK_LINE = rf"[ \t]*ctrl\[{ACK_NAME}\] = [^;]+;[^\n]*\n"
_ACK_SITE = re.compile(
    rf"(?P<payload>{_PAYLOAD_LINES})(?P<fence>{_FENCE_LINE})(?P<ack>{_ACK_LINE})"
)


def _mutate(source: str, rewrite: str) -> str:
    """Rewrite every `payload stores; fence; ack` site; each kernel that acks has one."""
    mutated, count = _ACK_SITE.subn(rewrite, source)
    if count == 0:
        raise ValueError("no `payload; __threadfence_system(); ack` site in the source")
    return mutated


MUTATIONS = {
    "fence moved after the ack": r"\g<payload>\g<ack>\g<fence>",
    "fence removed": r"\g<payload>\g<ack>",
    "fence commented out": r"\g<payload>// __threadfence_system();\n\g<ack>",
    "fence moved before the payload": r"\g<fence>\g<payload>\g<ack>",
    "ack moved before the payload": r"\g<ack>\g<fence>\g<payload>",
    "fence under an if": r"\g<payload>if (h == 0ull) __threadfence_system();\n\g<ack>",
    "fence in a conditional block": (
        r"\g<payload>if (h == 0ull) { __threadfence_system(); }\n\g<ack>"
    ),
}


def mutated_source(source: str, mutation: str) -> str:
    """`source` with one of MUTATIONS applied at every ack site."""
    return _mutate(source, MUTATIONS[mutation])


def ack_sites(source: str) -> int:
    return len(_ACK_SITE.findall(source))
