#!/usr/bin/env bash
# Makes the Python virtual environment the ONNX harness (onnx-tests/) runs in: python3 -m venv,
# then pip installs the pinned onnx-tests/requirements.txt (numpy, onnx, onnxruntime). Idempotent:
# a venv whose stamp matches the requirements and the interpreter is reused as is.
# Logs go to stderr; the venv's python path is the one line on stdout, so
#     PY="$(.ci/onnx_env.sh)" && "$PY" onnx-tests/node_tests.py ...
# Location: $NRT_ONNX_VENV, default target/onnx-venv (ignored by git).
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${NRT_ONNX_VENV:-target/onnx-venv}"
req=onnx-tests/requirements.txt
log() { printf 'onnx_env: %s\n' "$*" >&2; }

py="$(command -v python3 || true)"
if [ -z "$py" ]; then
  log "python3 missing: installing python3 and python3-venv"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2 && apt-get install -y -qq python3 python3-venv >&2
  py="$(command -v python3)"
fi

want="$(sha256sum "$req" | cut -d' ' -f1) $("$py" -c 'import sys; print(sys.version.split()[0])')"
stamp="$venv/.nrt-onnx-stamp"
if [ -x "$venv/bin/python" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  log "reusing $venv ($want)"
  echo "$(cd "$venv" && pwd)/bin/python"
  exit 0
fi

rm -rf "$venv"
mkdir -p "$(dirname "$venv")"
err="$(mktemp)"
if ! "$py" -m venv "$venv" 2> "$err" >&2; then
  # Debian/Ubuntu ship venv's ensurepip separately (python3-venv or python3.X-venv).
  log "python3 -m venv failed ($(tail -n1 "$err")): installing python3-venv"
  rm -rf "$venv"
  ver="$("$py" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2
  apt-get install -y -qq python3-venv >&2 || true
  apt-get install -y -qq "python$ver-venv" >&2 || true
  "$py" -m venv "$venv" >&2
fi
log "installing $(grep -cv '^#' "$req") pinned packages into $venv"
"$venv/bin/python" -m pip install -q --disable-pip-version-check -r "$req" >&2
"$venv/bin/python" -c 'import numpy, onnx, onnxruntime; print("onnx_env: numpy", numpy.__version__, "onnx", onnx.__version__, "onnxruntime", onnxruntime.__version__)' >&2
echo "$want" > "$stamp"
echo "$(cd "$venv" && pwd)/bin/python"
