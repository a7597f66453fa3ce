#!/usr/bin/python3
"""The load of the serving benchmark (bench/serve_bench.sh, docs/benchmarks.md).

Draws N completion requests of mixed prompt and output lengths from a text corpus (fixed by
--seed: prompts of 1 to 100 characters of the corpus, so some are longer than the model's
window of 64; max_tokens from 1 to 48; temperatures 0, 0.5, 0.8, 1; top k 0 or 10; a seed each),
sends them with C concurrent clients (keep-alive connections), then one at a time, and counts the
responses whose bytes differ between the two. Prints one JSON object: throughput (requests and
generated tokens per second) of both phases, p50/p99 latency of each, and the differing count.

With --system K every prompt starts with the same K characters (a system prompt; the rest 1 to
8 characters, and 1 to 8 tokens generated, so that K = 48 stays inside a window of 64), the
prefix cache's workload. --dump FILE writes the concurrent phase's response
bodies (one JSON string per line), for comparing two servers. --alone-only skips the concurrent
phase: one request at a time (batch 1), its latency per generated token.

  serve_load.py --port P [--requests N] [--clients C] [--seed S] [--corpus DIR] [--label NAME]
                [--system K] [--dump FILE] [--alone-only]
"""
import argparse
import http.client
import json
import os
import random
import statistics
import threading
import time


def corpus_text(path, limit=400000):
    files = sorted(f for f in os.listdir(path) if not f.startswith(".") and not f.endswith(".dat")
                   and os.path.isfile(os.path.join(path, f)) and not os.path.islink(os.path.join(path, f)))
    text = ""
    for f in files:
        with open(os.path.join(path, f), "rb") as h:
            text += h.read().decode("utf-8", errors="ignore")
        if len(text) > limit:
            break
    return text


def requests_of(n, seed, text, system=0):
    r = random.Random(seed)
    out = []
    head = ""
    if system:
        at = r.randrange(0, len(text) - system)
        head = text[at:at + system]
    for i in range(n):
        plen = r.choice([1, 4, 8]) if system else r.choice([1, 4, 12, 24, 40, 100])
        at = r.randrange(0, len(text) - plen)
        out.append({"prompt": head + text[at:at + plen], "max_tokens": r.choice([1, 4, 8] if system else [1, 4, 8, 16, 24, 32, 48]),
                    "temperature": r.choice([0.0, 0.5, 0.8, 1.0]), "top_k": r.choice([0, 0, 10]), "seed": r.randrange(1 << 32)})
    return out


def send(conn, body):
    b = json.dumps(body).encode()
    conn.request("POST", "/v1/completions", body=b, headers={"Content-Type": "application/json"})
    res = conn.getresponse()
    data = res.read()
    if res.status != 200:
        raise RuntimeError("status %d: %s" % (res.status, data[:200]))
    return data


def phase(port, reqs, clients):
    bodies, lat = [None] * len(reqs), [0.0] * len(reqs)
    nxt = [0]
    lock = threading.Lock()
    errors = []

    def client():
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
        while True:
            with lock:
                i = nxt[0]
                nxt[0] += 1
            if i >= len(reqs):
                return
            t0 = time.perf_counter()
            for attempt in range(3):
                try:
                    bodies[i] = send(conn, reqs[i])
                    break
                except (http.client.HTTPException, OSError) as e:  # a dropped keep-alive: reconnect
                    conn.close()
                    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
                    if attempt == 2:
                        errors.append(str(e))
                except RuntimeError as e:
                    errors.append(str(e))
                    break
            lat[i] = time.perf_counter() - t0

    t0 = time.perf_counter()
    ts = [threading.Thread(target=client) for _ in range(clients)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    wall = time.perf_counter() - t0
    if errors:
        raise SystemExit("serve_load: %d failed requests, the first: %s" % (len(errors), errors[0]))
    return bodies, lat, wall


def pct(xs, p):
    s = sorted(xs)
    return s[min(len(s) - 1, int(round(p / 100.0 * (len(s) - 1))))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--clients", type=int, default=64)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--corpus", default="/usr/share/games/fortunes")
    ap.add_argument("--label", default="server")
    ap.add_argument("--system", type=int, default=0)
    ap.add_argument("--dump", default="")
    ap.add_argument("--alone-only", action="store_true")
    a = ap.parse_args()
    reqs = requests_of(a.requests, a.seed, corpus_text(a.corpus), a.system)
    tokens = sum(q["max_tokens"] for q in reqs)
    if a.alone_only:
        seq, lat_s, wall_s = phase(a.port, reqs, 1)
        per_token = sorted(1000 * t / q["max_tokens"] for t, q in zip(lat_s, reqs))
        print(json.dumps({"label": a.label, "requests": len(reqs), "tokens": tokens, "seconds": wall_s,
                          "ms_per_token_p50": pct(per_token, 50), "ms_per_token_min": per_token[0]}), flush=True)
        return
    conc, lat_c, wall_c = phase(a.port, reqs, a.clients)
    if a.dump:
        with open(a.dump, "w") as f:
            for b in conc:
                f.write(json.dumps(b.decode("utf-8", errors="replace")) + "\n")
    seq, lat_s, wall_s = phase(a.port, reqs, 1)
    differ = sum(1 for x, y in zip(conc, seq) if x != y)
    print(json.dumps({
        "label": a.label, "requests": len(reqs), "clients": a.clients, "tokens": tokens,
        "concurrent": {"seconds": wall_c, "requests_per_s": len(reqs) / wall_c, "tokens_per_s": tokens / wall_c,
                       "p50_ms": 1000 * pct(lat_c, 50), "p99_ms": 1000 * pct(lat_c, 99)},
        "one_at_a_time": {"seconds": wall_s, "requests_per_s": len(reqs) / wall_s, "tokens_per_s": tokens / wall_s,
                          "p50_ms": 1000 * pct(lat_s, 50), "p99_ms": 1000 * pct(lat_s, 99)},
        "differing": differ, "mean_latency_ms": 1000 * statistics.mean(lat_c)}), flush=True)


if __name__ == "__main__":
    main()
