"""A CPU stand-in for the slice of CuPy the microbenchmarks use — for tests only.

It runs the benchmarks' host-side code end to end without a GPU: each stream is a worker
thread executing enqueued operations in order, events take a timestamp when reached,
"device" memory is host memory, and each kernel is a Python model of the CUDA C kernel
of the same name in `zerohop.microbench.kernels`. Kernel launches are checked against
the C signatures parsed from that source (count and numpy type of every argument), the
way CuPy packs them; copies are bounds-checked against the allocations they touch.
The timings it produces mean nothing: tests assert protocol and bookkeeping only.
"""

from __future__ import annotations

import ctypes
import itertools
import math
import queue
import re
import threading
import time
import types
from collections.abc import Callable
from typing import Any

import numpy as np

from zerohop.microbench.kernels import (
    CTRL_ACK,
    CTRL_CHECKSUM,
    CTRL_PROCESSED,
    CTRL_STATE,
    CTRL_STOP,
    CTRL_TOTAL,
    FNV_OFFSET,
    FNV_PRIME,
    MASK64,
    SOURCE,
)

C_TO_NUMPY = {
    "u64": np.uint64,
    "unsigned int": np.uint32,
    "int": np.int32,
    "long long": np.int64,
}
SIGNATURE = re.compile(r'extern "C" __global__ void (\w+)\(([^)]*)\)', re.S)


class FakeCudaError(RuntimeError):
    pass


def kernel_signatures(source: str) -> dict[str, list[str]]:
    """name -> C parameter types, from the kernels' source."""
    out: dict[str, list[str]] = {}
    for name, params in SIGNATURE.findall(source):
        types_ = []
        for param in params.split(","):
            words = param.split()
            types_.append(" ".join(words[:-1]))
        out[name] = types_
    return out


class FakeGpu:
    """One fake device: memory, streams, kernels. `module()` is what `import cupy` gives."""

    def __init__(
        self,
        *,
        device_count: int = 1,
        sm_count: int = 4,
        corrupt_copy_of_size: int | None = None,
        wrong_ring_hash: bool = False,
        blind_gate: bool = False,
    ) -> None:
        self.device_count = device_count
        self.sm_count = sm_count
        self.corrupt_copy_of_size = corrupt_copy_of_size
        self.wrong_ring_hash = wrong_ring_hash
        self.blind_gate = blind_gate  # the gate never sees the host's release
        self.allocations: dict[int, tuple[Any, int, str]] = {}  # addr -> (buf, size, kind)
        self.streams: list[FakeStreamBase] = []
        self.kernel_calls: dict[str, int] = {}
        self.ring_exit_states: list[int] = []
        self.errors: list[BaseException] = []
        self._ptrs = itertools.count(0x1000)
        self._local = threading.local()
        self._lock = threading.Lock()
        self.signatures = kernel_signatures(SOURCE)
        self.stream_class = self._make_stream_class()
        self.null_stream: FakeStreamBase = self.stream_class(null=True)

    # --- memory -----------------------------------------------------------------------------
    def alloc(self, size: int, kind: str) -> int:
        if size <= 0:
            raise FakeCudaError(f"cudaErrorInvalidValue: size {size}")
        buf = (ctypes.c_uint8 * size)()
        addr = ctypes.addressof(buf)
        self.allocations[addr] = (buf, size, kind)
        return addr

    def release(self, addr: int, kinds: tuple[str, ...]) -> None:
        entry = self.allocations.get(addr)
        if entry is None or entry[2] not in kinds:
            raise FakeCudaError(f"cudaErrorInvalidValue: free of {addr:#x} ({kinds})")
        del self.allocations[addr]

    def check_range(self, addr: int, size: int) -> None:
        for base, (_, length, _) in self.allocations.items():
            if base <= addr < base + length:
                if addr + size > base + length:
                    raise FakeCudaError(f"access {addr:#x}+{size} beyond allocation end")
                return
        # not ours: a pageable numpy buffer; the benchmarks own its bounds

    def copy(self, dst: int, src: int, size: int) -> None:
        self.check_range(dst, size)
        self.check_range(src, size)
        ctypes.memmove(dst, src, size)
        if self.corrupt_copy_of_size == size:  # +1, so a read-back copy cannot undo it
            last = ctypes.c_uint8.from_address(dst + size - 1)
            last.value = (last.value + 1) & 0xFF

    # --- the module --------------------------------------------------------------------------
    def module(self) -> types.ModuleType:
        gpu = self
        cp: Any = types.ModuleType("cupy")
        cp.__version__ = "0.0.0+fake"
        cuda = types.SimpleNamespace()
        runtime = types.SimpleNamespace(
            getDeviceCount=lambda: gpu.device_count,
            getDeviceProperties=gpu.properties,
            deviceGetPCIBusId=lambda dev: "0000:01:00.0",
            driverGetVersion=lambda: 13000,
            runtimeGetVersion=lambda: 13000,
            hostAlloc=lambda size, flags: gpu.alloc(size, "mapped" if flags & 2 else "pinned"),
            freeHost=lambda addr: gpu.release(addr, ("mapped", "pinned")),
            malloc=lambda size: gpu.alloc(size, "device"),
            free=lambda addr: gpu.release(addr, ("device",)),
            pointerGetAttributes=gpu.pointer_attributes,
            memcpy=gpu.memcpy_sync,
            memcpyAsync=gpu.memcpy_async,
            memset=gpu.memset_sync,
            deviceSynchronize=gpu.synchronize_all,
            streamGetPriority=lambda ptr: gpu.stream_by_ptr(ptr).priority,
        )
        cuda.runtime = runtime
        cuda.Stream = self.stream_class
        cuda.Stream.null = self.null_stream
        cuda.Event = self._event_class()
        cuda.get_elapsed_time = self.elapsed_ms
        cuda.Device = lambda index=0: types.SimpleNamespace(use=lambda: None)
        cp.cuda = cuda
        cp.RawModule = self._raw_module_class()
        return cp

    def properties(self, device: int) -> dict[str, Any]:
        if not 0 <= device < self.device_count:
            raise FakeCudaError("cudaErrorInvalidDevice")
        return {
            "name": b"Fake GPU",
            "major": 9,
            "minor": 0,
            "multiProcessorCount": self.sm_count,
            "maxThreadsPerMultiProcessor": 2048,
            "canMapHostMemory": 1,
            "uuid": bytes(range(16)),
        }

    def pointer_attributes(self, addr: int) -> Any:
        entry = self.allocations.get(addr)
        mapped = entry is not None and entry[2] == "mapped"
        return types.SimpleNamespace(devicePointer=addr if mapped else 0, hostPointer=addr)

    def memcpy_sync(self, dst: int, src: int, size: int, kind: int) -> None:
        self.null_stream.synchronize()
        self.copy(dst, src, size)

    def memcpy_async(self, dst: int, src: int, size: int, kind: int, stream_ptr: int) -> None:
        if kind not in (1, 2):
            raise FakeCudaError(f"unexpected memcpy kind {kind}")
        self.stream_by_ptr(stream_ptr).enqueue(lambda: self.copy(dst, src, size))

    def memset_sync(self, ptr: int, value: int, size: int) -> None:
        self.check_range(ptr, size)
        ctypes.memset(ptr, value, size)

    def synchronize_all(self) -> None:
        for stream in list(self.streams):
            stream.synchronize()

    def stream_by_ptr(self, ptr: int) -> FakeStreamBase:
        if ptr == 0:
            return self.null_stream
        for stream in self.streams:
            if stream.ptr == ptr:
                return stream
        raise FakeCudaError(f"cudaErrorInvalidResourceHandle: stream {ptr:#x}")

    def current_stream(self) -> FakeStreamBase:
        stack = getattr(self._local, "stack", None)
        return stack[-1] if stack else self.null_stream

    def push(self, stream: FakeStreamBase) -> None:
        if not hasattr(self._local, "stack"):
            self._local.stack = []
        self._local.stack.append(stream)

    def pop(self) -> None:
        self._local.stack.pop()

    def elapsed_ms(self, start: Any, end: Any) -> float:
        if not (start.done and end.done) or start.time is None or end.time is None:
            raise FakeCudaError("cudaErrorNotReady: event not recorded/completed")
        return (end.time - start.time) * 1e3

    def shutdown(self) -> None:
        for stream in list(self.streams):
            stream.stop()

    # --- classes bound to this fake -------------------------------------------------------------
    def _make_stream_class(self) -> type[Any]:
        gpu = self

        class Stream(FakeStreamBase):
            null: Any = None

            def __init__(
                self, null: bool = False, non_blocking: bool = False, ptds: bool = False,
                priority: int | None = None,
            ) -> None:
                super().__init__(gpu, null=null, priority=priority or 0)

        return Stream

    def _event_class(self) -> type:
        gpu = self

        class Event:
            def __init__(
                self, block: bool = False, disable_timing: bool = False, interprocess: bool = False
            ) -> None:
                self.time: float | None = None
                self._recorded = 0
                self._reached = 0
                self._cv = threading.Condition()

            def record(self, stream: Any = None) -> None:
                stream = stream or gpu.current_stream()
                with self._cv:
                    self._recorded += 1
                    gen = self._recorded
                stream.enqueue(lambda: self._reach(gen))

            def _reach(self, gen: int) -> None:
                with self._cv:
                    self.time = time.perf_counter()
                    self._reached = max(self._reached, gen)
                    self._cv.notify_all()

            def wait_reached(self, gen: int, timeout: float = 30.0) -> None:
                with self._cv:
                    if not self._cv.wait_for(lambda: self._reached >= gen, timeout):
                        raise FakeCudaError("event never reached (deadlock in the fake)")

            @property
            def done(self) -> bool:
                with self._cv:
                    return self._reached >= self._recorded

            def synchronize(self) -> None:
                with self._cv:
                    gen = self._recorded
                self.wait_reached(gen)

        return Event

    def _raw_module_class(self) -> type:
        gpu = self

        class RawModule:
            def __init__(self, *, code: str, options: tuple[str, ...] = ()) -> None:
                self.code = code

            def get_function(self, name: str) -> FakeKernel:
                if name not in gpu.signatures or name not in kernel_signatures(self.code):
                    raise FakeCudaError(f"CUDA_ERROR_NOT_FOUND: no kernel {name}")
                return FakeKernel(gpu, name, gpu.signatures[name], KERNEL_MODELS[name])

        return RawModule


class FakeStreamBase:
    """In-order execution of enqueued operations on a worker thread."""

    _ptrs = itertools.count(0x5000)

    def __init__(self, gpu: FakeGpu, *, null: bool, priority: int) -> None:
        self.gpu = gpu
        self.ptr = 0 if null else next(self._ptrs)
        self.priority = max(-5, min(0, priority))  # CUDA clamps into [greatest, least]
        self._queue: queue.Queue[Callable[[], None] | None] = queue.Queue()
        self._pending = 0
        self._cv = threading.Condition()
        self._thread: threading.Thread | None = None
        self._capture: list[Callable[[], None]] | None = None
        gpu.streams.append(self)

    def enqueue(self, op: Callable[[], None]) -> None:
        if self._capture is not None:
            self._capture.append(op)
            return
        if self._thread is None:
            self._thread = threading.Thread(target=self._work, daemon=True)
            self._thread.start()
        with self._cv:
            self._pending += 1
        self._queue.put(op)

    def _work(self) -> None:
        while True:
            op = self._queue.get()
            if op is None:
                return
            try:
                op()
            except BaseException as exc:
                self.gpu.errors.append(exc)
            finally:
                with self._cv:
                    self._pending -= 1
                    self._cv.notify_all()

    def synchronize(self) -> None:
        with self._cv:
            if not self._cv.wait_for(lambda: self._pending == 0, 60.0):
                raise FakeCudaError("stream never drained (deadlock in the fake)")
        if self.gpu.errors:
            raise FakeCudaError(f"sticky error: {self.gpu.errors[0]!r}")

    @property
    def done(self) -> bool:
        with self._cv:
            return self._pending == 0

    def wait_event(self, event: Any) -> None:
        gen = event._recorded
        self.enqueue(lambda: event.wait_reached(gen))

    def begin_capture(self, mode: int | None = None) -> None:
        if self.ptr == 0:
            raise RuntimeError("cannot capture on the default (legacy) stream")
        self._capture = []

    def end_capture(self) -> FakeGraph:
        ops, self._capture = self._capture or [], None
        return FakeGraph(self.gpu, ops)

    def stop(self) -> None:
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join(timeout=5)

    def __enter__(self) -> FakeStreamBase:
        self.gpu.push(self)
        return self

    def __exit__(self, *exc: object) -> None:
        self.gpu.pop()


class FakeGraph:
    def __init__(self, gpu: FakeGpu, ops: list[Callable[[], None]]) -> None:
        self.gpu = gpu
        self.ops = ops

    def upload(self, stream: Any = None) -> None:
        pass

    def launch(self, stream: Any = None) -> None:
        target = stream or self.gpu.current_stream()
        for op in self.ops:
            target.enqueue(op)


class FakeKernel:
    def __init__(
        self, gpu: FakeGpu, name: str, params: list[str], model: Callable[..., None]
    ) -> None:
        self.gpu = gpu
        self.name = name
        self.params = params
        self.model = model

    def __call__(self, grid: tuple, block: tuple, args: tuple, **kwargs: Any) -> None:
        if not (isinstance(grid, tuple) and isinstance(block, tuple)):
            raise TypeError("grid and block must be tuples")
        if len(args) != len(self.params):
            raise FakeCudaError(
                f"{self.name}: {len(args)} arguments for {len(self.params)} parameters"
            )
        for i, (arg, ctype) in enumerate(zip(args, self.params, strict=True)):
            expected = C_TO_NUMPY[ctype]
            if type(arg) is not expected:
                raise FakeCudaError(
                    f"{self.name}: argument {i} is {type(arg).__name__}, the kernel takes "
                    f"{ctype} ({expected.__name__})"
                )
        values = [int(a) for a in args]
        stream = kwargs.get("stream") or self.gpu.current_stream()
        self.gpu.kernel_calls[self.name] = self.gpu.kernel_calls.get(self.name, 0) + 1
        stream.enqueue(lambda: self.model(self.gpu, grid, block, *values))


# --- Python models of the CUDA kernels ---------------------------------------------------------
def _u64(addr: int) -> ctypes.c_uint64:
    return ctypes.c_uint64.from_address(addr)


def _u32(addr: int) -> ctypes.c_uint32:
    return ctypes.c_uint32.from_address(addr)


def _fnv(words: list[int]) -> int:
    h = FNV_OFFSET
    for w in words:
        h = ((h ^ w) * FNV_PRIME) & MASK64
    return h


def _empty(gpu: FakeGpu, grid: tuple, block: tuple, unused: int) -> None:
    pass


def _gate(gpu: FakeGpu, grid: tuple, block: tuple, flag: int, outcome: int, timeout_ns: int,
          cycles: int) -> None:
    t0 = time.perf_counter_ns()
    result = 1
    while gpu.blind_gate or _u32(flag).value == 0:
        if time.perf_counter_ns() - t0 > timeout_ns:
            result = 2
            break
        time.sleep(0)
    _u32(outcome).value = result


def _spin_blocks(gpu: FakeGpu, grid: tuple, block: tuple, spin_ns: int, cycles: int) -> None:
    blocks_per_sm = max(1, 2048 // block[0])
    waves = math.ceil(grid[0] / (gpu.sm_count * blocks_per_sm))
    time.sleep(min(0.2, waves * spin_ns / 1e9))


def _ring_consumer(gpu: FakeGpu, grid: tuple, block: tuple, ring: int, ctrl: int, mask: int,
                   words: int, timeout_ns: int, cycles: int) -> None:
    t0 = time.perf_counter_ns()
    _u64(ctrl + 8 * CTRL_STATE).value = 1
    expected, processed, total, state, polls = 1, 0, 0, 3, 0
    while True:
        slot = ring + ((expected - 1) & mask) * words * 8
        if _u64(slot).value == expected:
            h = _fnv([_u64(slot + 8 * i).value for i in range(1, words)])
            if gpu.wrong_ring_hash:
                h ^= 1
            total = (total + h) & MASK64
            processed += 1
            _u64(ctrl + 8 * CTRL_CHECKSUM).value = h
            _u64(ctrl + 8 * CTRL_TOTAL).value = total
            _u64(ctrl + 8 * CTRL_PROCESSED).value = processed
            _u64(ctrl + 8 * CTRL_ACK).value = expected
            expected += 1
        else:
            time.sleep(0)
        polls += 1
        if polls % 32 == 0:
            if _u64(ctrl + 8 * CTRL_STOP).value != 0:
                state = 2
                break
            if time.perf_counter_ns() - t0 > timeout_ns:
                break
    gpu.ring_exit_states.append(state)
    _u64(ctrl + 8 * CTRL_STATE).value = state


def _ack_from_args(gpu: FakeGpu, grid: tuple, block: tuple, ctrl: int, words: int,
                   *w: int) -> None:
    _u64(ctrl + 8 * CTRL_CHECKSUM).value = _fnv(list(w[1:words]))
    _u64(ctrl + 8 * CTRL_ACK).value = w[0]


def _ack_from_device(gpu: FakeGpu, grid: tuple, block: tuple, desc: int, ctrl: int,
                     words: int) -> None:
    gpu.check_range(desc, words * 8)
    _u64(ctrl + 8 * CTRL_CHECKSUM).value = _fnv(
        [_u64(desc + 8 * i).value for i in range(1, words)]
    )
    _u64(ctrl + 8 * CTRL_ACK).value = _u64(desc).value


KERNEL_MODELS: dict[str, Callable[..., None]] = {
    "zh_empty": _empty,
    "zh_gate": _gate,
    "zh_spin_blocks": _spin_blocks,
    "zh_ring_consumer": _ring_consumer,
    "zh_ack_from_args": _ack_from_args,
    "zh_ack_from_device": _ack_from_device,
}
