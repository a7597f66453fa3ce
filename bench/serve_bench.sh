#!/usr/bin/env bash
# The serving benchmark (make bench-serve; docs/benchmarks.md, docs/serving.md): C concurrent
# clients send N completion requests of mixed prompt and output lengths to `bitgrad serve`
# (the fortunes GPT), then the same requests one at a time; the table gives the throughput of
# both, p50/p99 latency, and how many responses differ between them (bitgrad promises 0). Then
# the same load against a PyTorch eager server of the same weights (bench/serve_torch.py).
#   bench/serve_bench.sh BUILD OUT    env: SERVE_RUN (a trained run; default: train one here for
#   SERVE_STEPS=300 steps), SERVE_REQUESTS=2000, SERVE_CLIENTS=64, SERVE_THREADS=1, SERVE_SEED=1
set -euo pipefail
BUILD=${1:-build}
OUT=${2:-$BUILD/bench-serve}
N=${SERVE_REQUESTS:-2000}
C=${SERVE_CLIENTS:-64}
THREADS=${SERVE_THREADS:-1}
SEED=${SERVE_SEED:-1}
mkdir -p "$OUT"
RUN=${SERVE_RUN:-$OUT/fortunes}
if [ ! -e "$RUN/checkpoints/latest" ]; then
  echo "serve_bench: training $RUN (${SERVE_STEPS:-300} steps of examples/fortunes_gpt.toml)"
  rm -rf "$RUN"
  nice "$BUILD/bin/bitgrad" train examples/fortunes_gpt.toml --steps "${SERVE_STEPS:-300}" --threads "$THREADS" --out "$RUN" > "$OUT/train.log"
fi

# bitgrad serve on a free port
nice "$BUILD/bin/bitgrad" serve "$RUN" --port 0 --threads "$THREADS" --max-batch "$C" --max-queue "$C" > "$OUT/serve.log" 2>&1 &
SERVER=$!
trap 'kill $SERVER 2>/dev/null || true' EXIT
for _ in $(seq 100); do grep -q "on http://" "$OUT/serve.log" 2>/dev/null && break; sleep 0.1; done
PORT=$(sed -n 's/.*on http:\/\/[^:]*:\([0-9]*\)$/\1/p' "$OUT/serve.log")
echo "serve_bench: bitgrad serve on port $PORT: $N requests, $C clients, then one at a time"
nice /usr/bin/python3 bench/serve_load.py --port "$PORT" --requests "$N" --clients "$C" --seed "$SEED" --label bitgrad > "$OUT/bitgrad.json"
curl -s "http://127.0.0.1:$PORT/metrics" > "$OUT/metrics.txt" || true
kill -TERM $SERVER
wait $SERVER
echo "serve_bench: bitgrad serve exited $?"

# the PyTorch eager baseline on the same weights
PORT=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
nice /usr/bin/python3 bench/serve_torch.py "$RUN" --port "$PORT" --threads "$THREADS" --max-batch "$C" > "$OUT/torch.log" 2>&1 &
SERVER=$!
for _ in $(seq 300); do curl -sf "http://127.0.0.1:$PORT/health" > /dev/null 2>&1 && break; sleep 0.2; done
echo "serve_bench: PyTorch baseline on port $PORT"
nice /usr/bin/python3 bench/serve_load.py --port "$PORT" --requests "$N" --clients "$C" --seed "$SEED" --label "pytorch-eager" > "$OUT/torch.json"
kill $SERVER
wait $SERVER 2>/dev/null || true
trap - EXIT

/usr/bin/python3 - "$OUT" <<'PY'
import json, sys
out = sys.argv[1]
rows = [json.load(open(out + "/bitgrad.json")), json.load(open(out + "/torch.json"))]
lines = ["| server | requests | clients | batched req/s | batched tok/s | one-at-a-time req/s | one-at-a-time tok/s | speed-up | p50 ms (batched) | p99 ms (batched) | p50 ms (alone) | differing responses |",
         "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
for r in rows:
    c, s = r["concurrent"], r["one_at_a_time"]
    lines.append("| %s | %d | %d | %.1f | %.0f | %.1f | %.0f | %.2fx | %.0f | %.0f | %.0f | %d |" % (
        r["label"], r["requests"], r["clients"], c["requests_per_s"], c["tokens_per_s"], s["requests_per_s"], s["tokens_per_s"],
        c["requests_per_s"] / s["requests_per_s"], c["p50_ms"], c["p99_ms"], s["p50_ms"], r["differing"]))
open(out + "/serve_bench.md", "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
PY
