#!/usr/bin/env bash
# The serving benchmark (make bench-serve; docs/benchmarks.md, docs/serving.md): C concurrent
# clients send N completion requests of mixed prompt and output lengths to `bitgrad serve`
# (the fortunes GPT), then the same requests one at a time; the table gives the throughput of
# both, p50/p99 latency, and how many responses differ between them (bitgrad promises 0). Then
# the same load against a PyTorch eager server of the same weights (bench/serve_torch.py).
# Then two cases of their own: the prefix cache (SERVE_PREFIX_REQUESTS=500 requests that share a
# 48-character system prompt, to `bitgrad serve` without and with its prefix cache: throughput,
# hit rate, and how many responses differ between the two, which must be 0) and batch-1 latency
# (SERVE_ALONE_REQUESTS=40 requests one at a time, milliseconds per generated token, bitgrad and
# PyTorch at 1 and 2 threads).
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

# bitgrad serve with OPTIONS on a free port; its port in PORT, its pid in SERVER
start_bitgrad() {
  nice "$BUILD/bin/bitgrad" serve "$RUN" --port 0 --max-queue "$C" "$@" > "$OUT/serve.log" 2>&1 &
  SERVER=$!
  trap 'kill $SERVER 2>/dev/null || true' EXIT
  for _ in $(seq 100); do grep -q "on http://" "$OUT/serve.log" 2>/dev/null && break; sleep 0.1; done
  PORT=$(sed -n 's/.*on http:\/\/[^:]*:\([0-9]*\)$/\1/p' "$OUT/serve.log")
}
stop_server() {
  kill -TERM $SERVER
  wait $SERVER 2>/dev/null || true
  trap - EXIT
}

# the prefix cache: the same system-prompt load without and with it
NP=${SERVE_PREFIX_REQUESTS:-500}
for cache in 0 64; do
  start_bitgrad --threads "$THREADS" --max-batch "$C" --prefix-cache-mib "$cache"
  echo "serve_bench: prefix cache ${cache} MiB, port $PORT: $NP requests with a 48-character system prompt"
  nice /usr/bin/python3 bench/serve_load.py --port "$PORT" --requests "$NP" --clients "$C" --seed "$SEED" --system 48 \
    --label "prefix-cache-$cache" --dump "$OUT/prefix-$cache.jsonl" > "$OUT/prefix-$cache.json"
  curl -s "http://127.0.0.1:$PORT/metrics" > "$OUT/prefix-$cache.metrics" || true
  stop_server
done

# batch-1 latency: one request at a time, bitgrad and PyTorch at 1 and 2 threads
NA=${SERVE_ALONE_REQUESTS:-40}
for t in 1 2; do
  start_bitgrad --threads "$t" --max-batch 1
  nice /usr/bin/python3 bench/serve_load.py --port "$PORT" --requests "$NA" --seed "$SEED" --alone-only --label "bitgrad-$t" > "$OUT/alone-bitgrad-$t.json"
  stop_server
  PORT=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  nice /usr/bin/python3 bench/serve_torch.py "$RUN" --port "$PORT" --threads "$t" --max-batch 1 > "$OUT/torch.log" 2>&1 &
  SERVER=$!
  trap 'kill $SERVER 2>/dev/null || true' EXIT
  for _ in $(seq 300); do curl -sf "http://127.0.0.1:$PORT/health" > /dev/null 2>&1 && break; sleep 0.2; done
  nice /usr/bin/python3 bench/serve_load.py --port "$PORT" --requests "$NA" --seed "$SEED" --alone-only --label "torch-$t" > "$OUT/alone-torch-$t.json"
  kill $SERVER
  wait $SERVER 2>/dev/null || true
  trap - EXIT
done

/usr/bin/python3 - "$OUT" <<'PY'
import json, re, sys
out = sys.argv[1]
rows = [json.load(open(out + "/bitgrad.json")), json.load(open(out + "/torch.json"))]
lines = ["| server | requests | clients | batched req/s | batched tok/s | one-at-a-time req/s | one-at-a-time tok/s | speed-up | p50 ms (batched) | p99 ms (batched) | p50 ms (alone) | differing responses |",
         "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
for r in rows:
    c, s = r["concurrent"], r["one_at_a_time"]
    lines.append("| %s | %d | %d | %.1f | %.0f | %.1f | %.0f | %.2fx | %.0f | %.0f | %.0f | %d |" % (
        r["label"], r["requests"], r["clients"], c["requests_per_s"], c["tokens_per_s"], s["requests_per_s"], s["tokens_per_s"],
        c["requests_per_s"] / s["requests_per_s"], c["p50_ms"], c["p99_ms"], s["p50_ms"], r["differing"]))
lines += ["", "| prefix cache | requests (48-character system prompt) | clients | batched req/s | batched tok/s | p50 ms | p99 ms | lookups | hits | prompt tokens reused | responses differing from no cache |",
          "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
dumps = {}
for cache in (0, 64):
    r = json.load(open("%s/prefix-%d.json" % (out, cache)))
    dumps[cache] = open("%s/prefix-%d.jsonl" % (out, cache)).read().splitlines()
    m = open("%s/prefix-%d.metrics" % (out, cache)).read()
    get = lambda name: int(float(re.search(r"^%s (\S+)$" % name, m, re.M).group(1)))
    c = r["concurrent"]
    lines.append("| %s | %d | %d | %.1f | %.0f | %.0f | %.0f | %d | %d | %d | %s |" % (
        "off" if cache == 0 else "%d MiB" % cache, r["requests"], r["clients"], c["requests_per_s"], c["tokens_per_s"], c["p50_ms"],
        c["p99_ms"], get("bitgrad_prefix_cache_lookups_total"), get("bitgrad_prefix_cache_hits_total"),
        get("bitgrad_prefix_cache_reused_tokens_total"), "" if cache == 0 else str(sum(1 for x, y in zip(dumps[0], dumps[64]) if x != y))))
lines += ["", "| batch 1 (one request at a time) | threads | requests | ms per generated token, p50 | min |", "|---|---:|---:|---:|---:|"]
for t in (1, 2):
    for who in ("bitgrad", "torch"):
        r = json.load(open("%s/alone-%s-%d.json" % (out, who, t)))
        lines.append("| %s | %d | %d | %.2f | %.2f |" % ("bitgrad serve (KV cache)" if who == "bitgrad" else "PyTorch 1.13 eager (window forward)",
                                                       t, r["requests"], r["ms_per_token_p50"], r["ms_per_token_min"]))
open(out + "/serve_bench.md", "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
PY
