#!/bin/sh
# Check your own GPU box with gpuharness, as the real H200 run did (docs/gpu-calibration.md): register this machine
# as an owned `local` deployment next to a runtime that is already running on it, run the health suite in record
# mode (the probe, the GPU measurement on every GPU and every pair, the runtime's health and a model-free test
# generation), and write the cassette to send back.
#
#   bench/real_gpu.sh --python /opt/venv/bin/python3 [--port 8188] [--runtime comfyui] [--log FILE]
#                     [--process main.py] [--gpu "H100 SXM"] [--count N] [--endpoint URL] [--out DIR]
#
# --python: the runtime's interpreter (the one that imports torch); --endpoint: where its HTTP API answers (default
# http://127.0.0.1:PORT); --out: a new folder (default ./gpu-box), never
# overwritten. Run it with the Python that has gpuharness (GH_PYTHON, default python3). Exit 0: every check passed;
# 1: a check failed (the cassette is written either way); 2: bad arguments, or the folder exists.
set -eu
GH_PYTHON=${GH_PYTHON:-python3}
PORT=8188; RUNTIME=comfyui; PY=""; LOG=""; PROCESS=main.py; GPU=""; COUNT=""; ENDPOINT=""; OUT="$PWD/gpu-box"
usage() { echo "real_gpu.sh: $1 (usage: bench/real_gpu.sh --python PATH [--port N] [--runtime NAME] [--log FILE]" \
  "[--process PATTERN] [--gpu NAME] [--count N] [--endpoint URL] [--out DIR])" >&2; exit 2; }
while [ $# -gt 0 ]; do
  [ $# -ge 2 ] || usage "$1 needs a value"
  case "$1" in
    --python) PY=$2 ;; --port) PORT=$2 ;; --runtime) RUNTIME=$2 ;; --log) LOG=$2 ;; --process) PROCESS=$2 ;;
    --gpu) GPU=$2 ;; --count) COUNT=$2 ;; --endpoint) ENDPOINT=$2 ;; --out) OUT=$2 ;;
    *) usage "unknown argument $1" ;;
  esac
  shift 2
done
[ -n "$PY" ] || usage "--python names the runtime's interpreter (the one that imports torch)"
[ -x "$PY" ] || usage "--python $PY is not an executable interpreter"
case "$PORT" in ''|*[!0-9]*) usage "--port $PORT is not a port number" ;; esac
[ ! -e "$OUT" ] || usage "$OUT exists: name a new folder with --out (nothing is overwritten)"
if [ -z "$GPU" ] || [ -z "$COUNT" ]; then
  names=$(nvidia-smi --query-gpu=name --format=csv,noheader) || usage "nvidia-smi failed: name the GPU with --gpu"
  [ -n "$GPU" ] || GPU=$(printf '%s\n' "$names" | head -n 1)
  [ -n "$COUNT" ] || COUNT=$(printf '%s\n' "$names" | grep -c .)
fi
REGISTRY="$OUT/registry"; CASSETTES="$OUT/cassettes"; REPORTS="$OUT/reports"
mkdir -p "$OUT/ws" "$CASSETTES" "$REPORTS"
"$GH_PYTHON" -m gpuharness init --registry "$REGISTRY" >/dev/null
"$GH_PYTHON" -m gpuharness.health.own_box "$REGISTRY" "$OUT/ws" "$GPU" "$COUNT" "$RUNTIME" "$PORT" "$PY" \
  "$LOG" "$PROCESS" "${ENDPOINT:-http://127.0.0.1:$PORT}"
set +e
"$GH_PYTHON" -m gpuharness check health --gpu-mode record --registry "$REGISTRY" --cassettes "$CASSETTES" \
  --junitxml "$REPORTS/health.xml" -rA > "$REPORTS/health-run.txt" 2>&1
status=$?
set -e
tail -n 25 "$REPORTS/health-run.txt"
tar -czf "$OUT/gpuharness-recording.tar.gz" -C "$OUT" cassettes reports registry/deployments.json \
  registry/policy.json registry/workflows.json
echo
echo "cassette: $CASSETTES/ssh/dep_local_gpu.json"
echo "send back: $OUT/gpuharness-recording.tar.gz (the cassettes, the run's output, the registry it ran with)"
exit "$status"
