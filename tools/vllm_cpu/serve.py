"""Serve the tiny model on a real vLLM CPU engine until Ctrl-C, for trying zerohop by hand.

Run with zerohop's own python (not the vLLM venv's):

    python tools/vllm_cpu/serve.py [--port 8000] [--setup] [--model-dir DIR]

It does what the tests/vllm fixture does: find (or with --setup, create) the vLLM venv,
build the tiny model with its LoRA adapters a0..a3, start the server and print its URL.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path
from types import FrameType

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))  # tests/vllm_cpu.py: the vLLM fixture's own code

from tests.vllm_cpu import (  # noqa: E402
    VllmStartError,
    adapters_in,
    build_tiny_model,
    default_model_dir,
    probe_env,
    start_vllm,
)


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(argv)
    probe = probe_env(setup=args.setup)
    if probe.env is None:
        print(
            f"vLLM CPU env not found at {probe.venv}: run tools/vllm_cpu/setup_env.sh "
            f"or pass --setup ({probe.reason})",
            file=sys.stderr,
        )
        return 1
    model_dir = build_tiny_model(probe.env, args.model_dir)
    adapters = {} if args.no_lora else adapters_in(model_dir)
    stop_requested = threading.Event()

    def request_stop(signal_number: int, frame: FrameType | None) -> None:
        stop_requested.set()

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)
    try:
        server = start_vllm(
            probe.env,
            model_dir,
            port=args.port,
            lora_adapters=adapters,
            max_loras=args.max_loras,
            log_path=args.log,
        )
    except VllmStartError as exc:
        print(exc, file=sys.stderr)
        return 1
    with server:
        print(
            f"vLLM serving model 'tiny' (adapters: {', '.join(server.adapter_names) or 'none'}) "
            f"at {server.url} (pid {server.pid}, ready in {server.startup_s or 0:.1f} s, "
            f"log {server.log_path}); Ctrl-C stops it",
            flush=True,
        )
        while not stop_requested.wait(timeout=1.0):
            if server.process.poll() is not None:
                print(f"vLLM exited on its own:\n{server.log_tail()}", file=sys.stderr)
                return 1
    return 0


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0, help="port (default: a free one)")
    parser.add_argument("--setup", action="store_true", help="create the vLLM venv if missing")
    parser.add_argument("--model-dir", type=Path, default=default_model_dir())
    parser.add_argument("--no-lora", action="store_true", help="serve without adapters")
    parser.add_argument("--max-loras", type=int, default=2, help="adapters active at once")
    parser.add_argument("--log", type=Path, default=None, help="server log file")
    return parser.parse_args(argv)


if __name__ == "__main__":
    sys.exit(main())
