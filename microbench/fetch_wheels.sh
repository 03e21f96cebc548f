#!/usr/bin/env bash
# Download, on a machine with PyPI, the wheels that the lent GPU machine lacks, into .whl/.
#
# The GPU machine (Python 3.12, x86-64, no network) already has numpy, pandas, pyarrow,
# jinja2, click, requests, msgpack, psutil, pyyaml, scipy, uvloop, prometheus-client,
# nvidia-ml-py, pytest, pytest-benchmark, h11, cupy-cuda13x ... (see the device notes).
# What zerohop still needs there: pydantic (+ core), Locust with its closure, and orjson.
# Versions are pinned to the ones this repository is tested with. After downloading,
# the script checks that every wheel's requirements are met by another wheel here or by
# a package the GPU machine is known to have, and prints the total size (limit: 40 MiB).
#
# Usage: bash microbench/fetch_wheels.sh [DEST]   (DEST defaults to .whl in the repo root)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEST="${1:-$ROOT/.whl}"
PY="${PYTHON:-python3}"
MAX_MIB=40

PINS=(
  pydantic==2.14.4 pydantic-core==2.50.5 annotated-types==0.8.0 typing-inspection==0.4.5
  typing-extensions==4.16.0
  locust==2.47.0 gevent==26.9.0 greenlet==3.5.6 zope.event==6.2 zope.interface==8.7
  geventhttpclient==2.6.1 brotli==1.2.1 pyzmq==27.3.0
  flask==3.1.3 flask-cors==6.0.5 flask-login==0.6.3 werkzeug==3.1.9 itsdangerous==2.2.0
  blinker==1.9.0 configargparse==1.9.0
  python-socketio==5.18.1 python-engineio==4.15.1 bidict==0.24.1 simple-websocket==1.1.0
  wsproto==1.3.2
  orjson==3.13.0
)

# Importable on the GPU machine already (normalised names); requirements on these are
# assumed met. typing-extensions and werkzeug are carried anyway for their minimum versions.
PRESENT="numpy pandas pyarrow jinja2 markupsafe click requests urllib3 certifi idna
charset-normalizer msgpack psutil pyyaml scipy uvloop prometheus-client nvidia-ml-py pytest
pytest-benchmark h11 cupy-cuda13x packaging setuptools pluggy iniconfig pygments"

mkdir -p "$DEST"
PLATFORMS=()
for p in manylinux_2_39_x86_64 manylinux_2_35_x86_64 manylinux_2_34_x86_64 \
         manylinux_2_31_x86_64 manylinux_2_28_x86_64 manylinux_2_27_x86_64 \
         manylinux_2_24_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64 manylinux1_x86_64; do
  PLATFORMS+=(--platform "$p")
done

for pin in "${PINS[@]}"; do
  key="$(echo "${pin%%==*}_${pin##*==}_" | tr 'A-Z.-' 'a-z__')"
  if ls "$DEST" 2>/dev/null | tr 'A-Z.-' 'a-z__' | grep -q "^${key}"; then
    continue  # already here
  fi
  # pip warns about unreachable extra indexes configured on some machines: keep quiet.
  "$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp "${PLATFORMS[@]}" -d "$DEST" "$pin" 2> >(grep -v 'is ignored' >&2)
done

# zerohop itself, built from this checkout (always afresh: its version does not change
# between commits), so that the GPU machine runs it installed, its shipped folders
# (loadtests/, workloads/, report templates) mapped as setup.py maps them
rm -f "$DEST"/zerohop-*.whl
"$PY" -m pip wheel -q --no-deps -w "$DEST" "$ROOT" 2> >(grep -v 'is ignored' >&2)

"$PY" - "$DEST" "$PRESENT" <<'PYEOF'
"""Check the closure: every non-extra requirement of every wheel is satisfied."""
import sys, zipfile, pathlib, re
try:
    from packaging.requirements import Requirement
except ImportError:
    from pip._vendor.packaging.requirements import Requirement

dest, present = pathlib.Path(sys.argv[1]), set(sys.argv[2].split())
LAZY = {"tokenizers"}  # zerohop imports it only for --tokenizer, which the GPU run does not use
norm = lambda n: re.sub(r"[-_.]+", "-", n).lower()
env = {"python_version": "3.12", "python_full_version": "3.12.3", "sys_platform": "linux",
       "platform_system": "Linux", "platform_machine": "x86_64", "os_name": "posix",
       "implementation_name": "cpython", "platform_python_implementation": "CPython",
       "extra": ""}
wheels = sorted(dest.glob("*.whl"))
have = {}
for w in wheels:
    dist, version = w.name.split("-")[:2]
    if norm(dist) in have:
        sys.exit(f"two versions of {dist} in {dest}: keep one")
    have[norm(dist)] = version
missing = []
for w in wheels:
    with zipfile.ZipFile(w) as z:
        meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        for line in z.read(meta).decode().splitlines():
            if not line.startswith("Requires-Dist:"):
                continue
            req = Requirement(line.split(":", 1)[1].strip())
            if req.marker is not None and not req.marker.evaluate(env):
                continue
            name = norm(req.name)
            if name in present or name in LAZY:
                continue
            if name not in have:
                missing.append(f"{w.name}: {req}")
            elif not req.specifier.contains(have[name], prereleases=True):
                missing.append(f"{w.name}: {req} (have {have[name]})")
total = sum(w.stat().st_size for w in wheels)
print(f"{len(wheels)} wheels, {total / 2**20:.1f} MiB in {dest}")
if missing:
    print("unmet requirements:\n  " + "\n  ".join(missing))
    sys.exit(1)
PYEOF

total_mib=$(du -sm "$DEST" | cut -f1)
if [ "$total_mib" -ge "$MAX_MIB" ]; then
  echo "wheels take ${total_mib} MiB, over the ${MAX_MIB} MiB budget" >&2
  exit 1
fi
