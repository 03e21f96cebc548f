#!/usr/bin/env bash
# The one prepared script for a lent GPU machine (no network, Python 3.12, CuPy there).
#
#   bash microbench/run_on_gpu.sh OUT_DIR        # from the repository root
#
# Steps, each under its own time limit, each running whatever the previous one did:
#   0. install the wheels carried in .whl/ (microbench/fetch_wheels.sh makes them, zerohop's
#      own from this checkout among them) into /tmp/site and put it on PYTHONPATH (src/
#      too when no zerohop wheel is carried); then NVRTC for the kernel-compile
#      tests: a carried nvidia_cuda_nvrtc-*.whl goes apart into /tmp/nvrtc (CuPy keeps
#      the copy it has); without one, the machine's own (the image has nvidia-cuda-nvrtc;
#      tests/microbench/nvrtc.py says where it looks) is used. ZEROHOP_NVRTC_LIB names it.
#   1. environment: nvidia-smi, nvidia-smi -q, Python/CuPy/NVML versions
#   2. `zerohop microbench --quick`: launch, ring and PCIe (ZEROHOP_MB_PLAN=full for the
#      1 GiB sweep)
#   2b. the energy check: NVML's total-energy counter before and after 5 s of matrix
#      products (`python -m zerohop.microbench.energy_check`): J and mean W into
#      energy-check.json (in results.tar.gz), its line appended to summary.txt
#   3. a short end-to-end run (embedded target + Locust, ~45 s) with NVML telemetry;
#      nvidia-smi samples the GPU alongside, independently of zerohop's sampler
#   4. `zerohop report` on the end-to-end run folder (with the microbench JSON copied in)
#   5. the GPU tests (real-GPU checks with plausible ranges, NVRTC compile and fence checks)
#      and the pytest-benchmark entry points (smoke preset), with ZEROHOP_REQUIRE_GPU=1:
#      a test that would skip (no CuPy, no device, no NVRTC) fails instead
# Everything lands in OUT_DIR as at most 7 flat files (the device tool returns <= 8):
#   run_on_gpu.log, summary.txt (the microbench table and goals), microbench-<gpu>.json,
#   environment.txt, report.html, pytest-benchmark.json, results.tar.gz (all run folders,
#   the nvidia-smi samples, pytest output).
# Overrides: ZEROHOP_E2E_CMD (a whole command for step 3), ZEROHOP_E2E_DURATION (45s),
# ZEROHOP_BUDGET_S (450: the total the steps' limits are cut to), PYTHON (python3),
# ZEROHOP_NVRTC_LIB (a libnvrtc.so to compile with).
set -uo pipefail  # no -e: a failing step must not stop the next

OUT="${1:?usage: bash microbench/run_on_gpu.sh OUT_DIR}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"

main() {
  cd "$ROOT" || exit 1
  local py="${PYTHON:-python3}"
  local budget="${ZEROHOP_BUDGET_S:-450}"
  local work results
  work="$(mktemp -d /tmp/zerohop-gpu.XXXXXX)"
  results="$work/results"
  mkdir -p "$results"
  export PYTHONUNBUFFERED=1
  export ZEROHOP_REQUIRE_GPU=1  # GPU tests fail rather than skip (tests/microbench/conftest.py)
  local t0=$SECONDS
  local -a failed=()

  step() { echo; echo "=== [$((SECONDS - t0))s] $*"; }
  # run_limited SECONDS CMD...: the limit, cut to what is left of the budget (>= 10 s)
  run_limited() {
    local want=$1; shift
    local left=$((budget - (SECONDS - t0)))
    local limit=$(( want < left ? want : left ))
    (( limit < 10 )) && limit=10
    timeout --kill-after=10 "$limit" "$@"
    local rc=$?
    (( rc == 124 || rc == 137 )) && echo "--- timed out after ${limit}s"
    return $rc
  }
  note_rc() { local rc=$1 what=$2; echo "--- $what: exit $rc"; (( rc == 0 )) || failed+=("$what: exit $rc"); }

  # --- 0. wheels ---------------------------------------------------------------------------
  step "0. install carried wheels"
  local -a wheels=() nvrtc_wheels=()
  local w
  for w in .whl/*.whl; do
    [[ -f "$w" ]] || continue
    case "${w##*/}" in
      nvidia_cuda_nvrtc-*) nvrtc_wheels+=("$w") ;;
      *) wheels+=("$w") ;;
    esac
  done
  if (( ${#wheels[@]} )); then
    run_limited 120 "$py" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
      --upgrade --target /tmp/site "${wheels[@]}"
    note_rc $? "wheel install"
    if compgen -G ".whl/zerohop-*.whl" > /dev/null; then  # this checkout, installed
      export PYTHONPATH="/tmp/site${PYTHONPATH:+:$PYTHONPATH}"
    else  # src/ alone has no zerohop.shipped.* (setup.py maps those folders in)
      export PYTHONPATH="$ROOT/src:/tmp/site${PYTHONPATH:+:$PYTHONPATH}"
    fi
  else
    echo "no wheels in .whl/ to install: using what the machine has"
    export PYTHONPATH="$ROOT/src${PYTHONPATH:+:$PYTHONPATH}"
  fi
  echo "PYTHONPATH=$PYTHONPATH"
  step "0b. NVRTC for the kernel-compile tests"
  if (( ${#nvrtc_wheels[@]} )) && [[ -z "${ZEROHOP_NVRTC_LIB:-}" ]]; then
    run_limited 120 "$py" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
      --upgrade --target /tmp/nvrtc "${nvrtc_wheels[0]}"
    note_rc $? "NVRTC wheel install"
    local lib
    lib="$(ls /tmp/nvrtc/nvidia/*/lib/libnvrtc.so* 2>/dev/null | grep -v -e builtins -e '\.alt\.' | head -1)"
    [[ -n "$lib" ]] && export ZEROHOP_NVRTC_LIB="$lib"
  fi
  local nvrtc_lib
  nvrtc_lib="$(run_limited 60 "$py" tests/microbench/nvrtc.py)"
  if [[ -n "$nvrtc_lib" ]]; then
    export ZEROHOP_NVRTC_LIB="$nvrtc_lib"
    echo "ZEROHOP_NVRTC_LIB=$ZEROHOP_NVRTC_LIB"
  else
    echo "no libnvrtc found: the kernel-compile tests will fail (ZEROHOP_REQUIRE_GPU=1)"
    failed+=("NVRTC: not found")
  fi

  # --- 1. environment ----------------------------------------------------------------------
  step "1. environment"
  run_limited 30 nvidia-smi
  {
    echo "# nvidia-smi -q"; run_limited 30 nvidia-smi -q
    echo; echo "# python"
    run_limited 60 "$py" - <<'PYEOF'
import importlib, platform, sys
print(sys.version.replace("\n", " "), platform.platform())
for name in ("zerohop", "cupy", "numpy", "pydantic", "click", "pynvml", "locust", "gevent",
             "pandas", "pyarrow", "jinja2", "pytest", "pytest_benchmark"):
    try:
        mod = importlib.import_module(name)
        print(f"{name:18} {getattr(mod, '__version__', '?')}  {getattr(mod, '__file__', '')}")
    except Exception as exc:
        print(f"{name:18} NOT IMPORTABLE: {type(exc).__name__}: {exc}")
try:
    import cupy
    rt = cupy.cuda.runtime
    print("CUDA devices:", rt.getDeviceCount(), "driver", rt.driverGetVersion(),
          "runtime", rt.runtimeGetVersion())
    print("has hostGetDevicePointer:", hasattr(rt, "hostGetDevicePointer"),
          "has deviceGetStreamPriorityRange:", hasattr(rt, "deviceGetStreamPriorityRange"))
except Exception as exc:
    print("CuPy/CUDA check failed:", type(exc).__name__, exc)
PYEOF
  } > "$OUT/environment.txt" 2>&1
  note_rc $? "environment"
  sed -n '/^# python/,$p' "$OUT/environment.txt"

  # --- 2. microbenchmarks ------------------------------------------------------------------
  step "2. zerohop microbench (${ZEROHOP_MB_PLAN:-quick})"
  local plan_flag="--quick"
  [[ "${ZEROHOP_MB_PLAN:-quick}" == "full" ]] && plan_flag=""
  run_limited 240 "$py" -m zerohop microbench $plan_flag --results-root "$results" \
    > "$OUT/summary.txt"
  note_rc $? "microbench"
  local mb_json slug=""
  mb_json="$(ls -t "$results"/*-microbench/microbench.json 2>/dev/null | head -1)"
  if [[ -n "$mb_json" ]]; then
    slug="$("$py" -c 'import json,sys; from zerohop.microbench.gpu_env import gpu_slug
print(gpu_slug(json.load(open(sys.argv[1]))["environment"]["gpu_name"]))' "$mb_json")"
    cp "$mb_json" "$OUT/microbench-${slug:-unknown-gpu}.json"
  else
    failed+=("microbench: no microbench.json")
  fi

  # --- 2b. energy over a fixed busy loop ------------------------------------------------------
  step "2b. energy check (NVML total-energy counter around 5 s of matrix products)"
  run_limited 60 "$py" -m zerohop.microbench.energy_check "$results/energy-check.json" \
    --seconds 5 | tee -a "$OUT/summary.txt"
  note_rc "${PIPESTATUS[0]}" "energy check"

  # --- 3. end-to-end run with NVML telemetry -----------------------------------------------
  step "3. end-to-end run (embedded target + Locust) with NVML telemetry"
  local duration="${ZEROHOP_E2E_DURATION:-45s}"
  local fields="timestamp,utilization.gpu,utilization.memory,memory.used,power.draw,temperature.gpu,clocks.sm,clocks.mem,pcie.link.gen.current,pcie.link.width.current,clocks_event_reasons.active"
  nvidia-smi --query-gpu="$fields" --format=csv,noheader > /dev/null 2>&1 \
    || fields="timestamp,utilization.gpu,memory.used,power.draw,temperature.gpu,clocks.sm,clocks.mem"
  timeout 300 nvidia-smi --query-gpu="$fields" --format=csv -lms 500 \
    > "$results/nvidia-smi-samples.csv" 2>&1 &
  local smi_pid=$!
  local run_help
  run_help="$("$py" -m zerohop run --help 2>/dev/null)"
  if [[ -n "${ZEROHOP_E2E_CMD:-}" ]]; then
    run_limited 150 bash -c "$ZEROHOP_E2E_CMD"
    note_rc $? "end-to-end (ZEROHOP_E2E_CMD)"
  elif grep -q -- "--duration" <<<"$run_help"; then
    # shellcheck disable=SC2054  # the comma-separated telemetry list is one argument
    local -a run_args=(--duration "$duration" --name gpu-e2e --results-dir "$results"
                       --telemetry nvml,prom,loadgen)
    grep -q -- "--microbench" <<<"$run_help" && run_args+=(--microbench off)
    grep -q -- "--no-report" <<<"$run_help" && run_args+=(--no-report)
    run_limited 150 "$py" -m zerohop run "${run_args[@]}"
    note_rc $? "end-to-end (zerohop run)"
  else
    run_limited 150 "$py" -m locust -f loadtests/ --headless -u 16 -r 8 -t "$duration" \
      --only-summary --results-dir "$results" --run-name gpu-e2e --telemetry nvml,prom,loadgen
    note_rc $? "end-to-end (locust)"
  fi
  kill "$smi_pid" 2>/dev/null; wait "$smi_pid" 2>/dev/null
  echo "nvidia-smi samples: $(($(wc -l < "$results/nvidia-smi-samples.csv") - 1))"
  local e2e_dir
  e2e_dir="$(ls -td "$results"/*-gpu-e2e* 2>/dev/null | head -1)"

  # --- 4. report -----------------------------------------------------------------------------
  step "4. zerohop report"
  if [[ -n "$e2e_dir" ]]; then
    [[ -n "$mb_json" && ! -f "$e2e_dir/microbench.json" ]] && cp "$mb_json" "$e2e_dir/"
    run_limited 90 "$py" -m zerohop report "$e2e_dir" -o "$e2e_dir/report.html"
    note_rc $? "report"
    [[ -f "$e2e_dir/report.html" ]] && cp "$e2e_dir/report.html" "$OUT/report.html"
  else
    echo "no end-to-end run folder: no report"
    failed+=("report: no run folder")
  fi

  # --- 5. GPU tests and pytest-benchmark entry points ------------------------------------------
  step "5. GPU tests + pytest-benchmark entry points (smoke preset)"
  ZEROHOP_MICROBENCH_PLAN=smoke run_limited 120 "$py" -m pytest -q -p no:cacheprovider \
    -m gpu tests/microbench microbench --benchmark-json "$OUT/pytest-benchmark.json" \
    --junitxml "$results/pytest-gpu.xml" \
    > "$results/pytest-gpu.txt" 2>&1
  note_rc $? "pytest -m gpu"
  tail -n 25 "$results/pytest-gpu.txt"

  # --- pack ----------------------------------------------------------------------------------
  step "pack results"
  cp "$OUT/environment.txt" "$results/" 2>/dev/null
  tar -C "$work" -czf "$OUT/results.tar.gz" results
  if (( $(stat -c %s "$OUT/results.tar.gz") > 15 * 1024 * 1024 )); then
    echo "results.tar.gz over 15 MiB: packing again without the per-process record sinks"
    tar -C "$work" -czf "$OUT/results.tar.gz" --exclude='*/records/*' results
  fi
  ls -l "$OUT"
  echo
  echo "=== [$((SECONDS - t0))s] done; problems: ${#failed[@]}"
  local f
  for f in "${failed[@]}"; do echo "  - $f"; done
  echo
  echo "=== microbench summary"
  cat "$OUT/summary.txt" 2>/dev/null
  # the exit status: 0 only when the microbench JSON exists and no step failed
  [[ -n "$mb_json" ]] && (( ${#failed[@]} == 0 ))
}

main "$@" 2>&1 | tee "$OUT/run_on_gpu.log"
exit "${PIPESTATUS[0]}"
