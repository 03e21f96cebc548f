"""The kernels fence their payload before the ack, read from the CUDA C text (no NVRTC).

The PTX NVRTC makes of the same source is checked by test_kernels_compile.py (GPU
script); here the PTX analyser itself is checked on planted PTX.
"""

from __future__ import annotations

import pytest

from tests.microbench.fence_order import (
    MUTATIONS,
    ack_sites,
    mutated_source,
    ptx_fence_problems,
    source_fence_problems,
    strip_comments,
)
from zerohop.microbench.kernels import SOURCE

pytestmark = pytest.mark.unit

ACK_KERNELS = {"zh_ring_consumer", "zh_ack_from_args", "zh_ack_from_device"}


def test_every_ack_is_fenced_after_its_payload_in_the_source() -> None:
    problems = source_fence_problems(SOURCE)
    assert set(problems) == ACK_KERNELS  # the check found every kernel that acks
    assert problems == {name: [] for name in ACK_KERNELS}


@pytest.mark.parametrize("mutation", sorted(MUTATIONS))
def test_a_misplaced_fence_is_caught_in_every_ack_kernel(mutation: str) -> None:
    assert ack_sites(SOURCE) == len(ACK_KERNELS)  # the mutation reaches each kernel
    problems = source_fence_problems(mutated_source(SOURCE, mutation))
    assert set(problems) == ACK_KERNELS
    for name in ACK_KERNELS:
        assert problems[name], f"{mutation}: {name} passed"


def test_a_fence_elsewhere_in_the_kernel_does_not_count() -> None:
    """The old check's hole: the ring consumer fences at start-up and after reading the
    sequence number, so "some membar before the ack" held with the ack's own fence gone."""
    broken = mutated_source(SOURCE, "fence removed")
    assert broken.count("__threadfence_system();") >= 4
    assert source_fence_problems(broken)["zh_ring_consumer"]


def test_comments_are_not_code() -> None:
    assert strip_comments("a; // __threadfence_system();\nb; /* x\n y */ c;").split() == [
        "a;", "b;", "c;",
    ]


def _ptx(body: str) -> str:
    return f".visible .entry zh_k(\n\t.param .u64 zh_k_param_0\n)\n{{\n{body}\n}}\n"


GOOD_PTX = """\
\tld.param.u64 \t%rd1, [zh_k_param_0];
\tst.volatile.global.u64 \t[%rd1+72], %rd30;
\tst.volatile.global.u64 \t[%rd1+80], %rd31;
\tmembar.sys;
\tst.volatile.global.u64 \t[%rd1+64], %rd2;
\tmembar.sys;
\tret;"""


def test_ptx_fence_between_payload_and_ack_passes() -> None:
    assert ptx_fence_problems(_ptx(GOOD_PTX)) == {"zh_k": []}
    fence_sc = GOOD_PTX.replace("\tmembar.sys;\n\tst.volatile.global.u64 \t[%rd1+64]",
                                "\tfence.sc.sys;\n\tst.volatile.global.u64 \t[%rd1+64]")
    assert ptx_fence_problems(_ptx(fence_sc)) == {"zh_k": []}


@pytest.mark.parametrize(
    ("name", "body"),
    [
        ("fence after the ack", GOOD_PTX.replace(
            "\tmembar.sys;\n\tst.volatile.global.u64 \t[%rd1+64], %rd2;",
            "\tst.volatile.global.u64 \t[%rd1+64], %rd2;\n\tmembar.sys;")),
        ("fence before the payload", GOOD_PTX.replace(
            "\tst.volatile.global.u64 \t[%rd1+72], %rd30;\n"
            "\tst.volatile.global.u64 \t[%rd1+80], %rd31;\n\tmembar.sys;",
            "\tmembar.sys;\n\tst.volatile.global.u64 \t[%rd1+72], %rd30;\n"
            "\tst.volatile.global.u64 \t[%rd1+80], %rd31;")),
        ("no fence", GOOD_PTX.replace("\tmembar.sys;\n", "")),
        ("a gpu-scope fence only", GOOD_PTX.replace("membar.sys", "membar.gl")),
        ("payload in another basic block", GOOD_PTX.replace(
            "\tmembar.sys;\n\tst.volatile.global.u64 \t[%rd1+64]",
            "$L__BB0_2:\n\tmembar.sys;\n\tst.volatile.global.u64 \t[%rd1+64]")),
        ("payload stored after the ack", GOOD_PTX.replace(
            "\tst.volatile.global.u64 \t[%rd1+64], %rd2;",
            "\tst.volatile.global.u64 \t[%rd1+64], %rd2;\n"
            "\tst.volatile.global.u64 \t[%rd1+88], %rd9;")),
    ],
)
def test_ptx_misplaced_fence_is_caught(name: str, body: str) -> None:
    assert body != GOOD_PTX, name
    problems = ptx_fence_problems(_ptx(body))
    assert problems["zh_k"], name


def test_ptx_without_an_ack_store_is_not_reported() -> None:
    plain = GOOD_PTX.replace("[%rd1+64]", "[%rd1+128]")
    assert ptx_fence_problems(_ptx(plain)) == {}
