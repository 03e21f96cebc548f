"""Host and device buffers with explicit lifetimes, and the stream gate.

Raw `cudaHostAlloc`/`cudaMalloc` through CuPy's runtime bindings rather than CuPy's
memory pools: a benchmark must know exactly which memory it touches (pinned or not,
mapped or not), and must give it back even when a measurement fails half-way.
"""

from __future__ import annotations

import ctypes
from types import ModuleType, TracebackType
from typing import Any, Self

import numpy as np

from zerohop.microbench.kernels import GATE_RELEASED, GATE_TIMED_OUT, Kernels, cycles_guard

# CUDA runtime ABI constants (stable since CUDA 4).
HOST_ALLOC_PORTABLE = 0x01
HOST_ALLOC_MAPPED = 0x02
MEMCPY_HOST_TO_DEVICE = 1
MEMCPY_DEVICE_TO_HOST = 2


class _FreedOnExit:
    """`with buffer:` gives the memory back on the way out, even when a step raises."""

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


class HostBuffer(_FreedOnExit):
    """Pinned host memory (`cudaHostAlloc`), optionally mapped into the device's address
    space (zero-copy). `.bytes` is a numpy view of it; valid until `close()`."""

    def __init__(self, cp: ModuleType, nbytes: int, *, mapped: bool = False) -> None:
        if nbytes <= 0:
            raise ValueError(f"buffer size must be positive, got {nbytes}")
        self._rt = cp.cuda.runtime
        self.nbytes = nbytes
        flags = HOST_ALLOC_PORTABLE | (HOST_ALLOC_MAPPED if mapped else 0)
        self.host_ptr: int = int(self._rt.hostAlloc(nbytes, flags))
        try:
            raw = (ctypes.c_uint8 * nbytes).from_address(self.host_ptr)
            view = np.frombuffer(memoryview(raw), dtype=np.uint8)
            self.bytes: np.ndarray[Any, np.dtype[np.uint8]] = view
            self.device_ptr: int = device_pointer(self._rt, self.host_ptr) if mapped else 0
        except BaseException:
            self._rt.freeHost(self.host_ptr)
            self.host_ptr = 0
            raise

    def words(self) -> np.ndarray[Any, np.dtype[np.uint64]]:
        return self.bytes.view(np.uint64)

    def close(self) -> None:
        if self.host_ptr:
            self.bytes = np.empty(0, dtype=np.uint8)
            self._rt.freeHost(self.host_ptr)
            self.host_ptr = 0


class DeviceBuffer(_FreedOnExit):
    """Plain device memory (`cudaMalloc`), never managed memory."""

    def __init__(self, cp: ModuleType, nbytes: int) -> None:
        if nbytes <= 0:
            raise ValueError(f"buffer size must be positive, got {nbytes}")
        self._rt = cp.cuda.runtime
        self.nbytes = nbytes
        self.ptr: int = int(self._rt.malloc(nbytes))

    def close(self) -> None:
        if self.ptr:
            self._rt.free(self.ptr)
            self.ptr = 0


def device_pointer(runtime: Any, host_ptr: int) -> int:
    """The device address of mapped host memory. CuPy exposes no
    `cudaHostGetDevicePointer` in some versions; `cudaPointerGetAttributes` gives the same
    address (equal to the host address under unified addressing)."""
    get = getattr(runtime, "hostGetDevicePointer", None)
    if get is not None:
        ptr = int(get(host_ptr, 0))
    else:
        ptr = int(runtime.pointerGetAttributes(host_ptr).devicePointer)
    if ptr == 0:
        raise RuntimeError("mapped host memory has no device address (cudaHostAllocMapped?)")
    return ptr


class StreamGate:
    """A kernel that holds a stream until the host releases it.

    Work enqueued behind the gate starts only on release, so events around it time the
    GPU's work alone, without the host's enqueue cost (nvbench's blocking kernel). The
    gate gives up after `timeout_s`, so a host that never releases cannot hang the GPU;
    a sample whose gate timed out is discarded (`released_in_time()` is False).
    Only asynchronous work may go behind a gate: a call that waits for the gated stream
    (pageable copies, synchronisation) would wait for the timeout.
    """

    _FLAG_WORD = 0  # uint32 index the host writes
    _OUTCOME_WORD = 16  # uint32 index (byte 64, its own cache line) the kernel writes
    MAX_TIMEOUTS_IN_A_ROW = 3

    def __init__(self, cp: ModuleType, kernels: Kernels, *, timeout_s: float = 2.0) -> None:
        self._rt = cp.cuda.runtime
        self._buf = HostBuffer(cp, 128, mapped=True)
        self._words = self._buf.bytes.view(np.uint32)
        self._words[:] = 0
        self._timeouts_in_a_row = 0
        self._kernel = kernels.get("zh_gate")
        self._args = (
            np.uint64(self._buf.device_ptr + 4 * self._FLAG_WORD),
            np.uint64(self._buf.device_ptr + 4 * self._OUTCOME_WORD),
            np.uint64(int(timeout_s * 1e9)),
            np.int64(cycles_guard(timeout_s)),
        )

    def hold(self, stream: Any) -> None:
        """Enqueue the gate on `stream` (the previous gate must have finished)."""
        self._words[self._FLAG_WORD] = 0
        self._words[self._OUTCOME_WORD] = 0
        with stream:
            self._kernel((1,), (1,), self._args)

    def release(self) -> None:
        self._words[self._FLAG_WORD] = 1

    def released_in_time(self) -> bool:
        """After the gated stream has been synchronised: did the host release it? Raises
        after MAX_TIMEOUTS_IN_A_ROW timeouts: the GPU is then not seeing host writes to
        mapped memory, and every further sample would cost a full timeout."""
        outcome = int(self._words[self._OUTCOME_WORD])
        if outcome not in (GATE_RELEASED, GATE_TIMED_OUT):
            raise RuntimeError(f"gate kernel left outcome {outcome}: did it run?")
        if outcome == GATE_RELEASED:
            self._timeouts_in_a_row = 0
            return True
        self._timeouts_in_a_row += 1
        if self._timeouts_in_a_row >= self.MAX_TIMEOUTS_IN_A_ROW:
            raise RuntimeError(
                f"the gate kernel timed out {self._timeouts_in_a_row} times in a row: the GPU "
                "does not see the host's writes to mapped memory"
            )
        return False

    def close(self) -> None:
        """Release any gate still waiting and let it finish before its memory goes."""
        self.release()
        try:
            self._rt.deviceSynchronize()
        finally:
            self._buf.close()
