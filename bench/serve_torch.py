#!/usr/bin/python3
"""The PyTorch eager baseline of the serving benchmark (bench/serve_bench.sh, docs/benchmarks.md).

Serves a bitgrad GPT run's weights (config.toml, the latest checkpoint, vocabulary.json) with
PyTorch's eager modules (bench/gpt_peer.py's model: the same architecture) the way a plain
batching server does: every decoding step runs the active requests as one batch, their windows
right-padded to the longest (the causal mask keeps the padding out of the real positions), and
takes each request's logits at its last position. The draw follows `bitgrad sample`'s rule in
float64 (temperature, top k, the first token whose running sum exceeds u * sum) with u a
function of (seed, position) only, so that a response could be a function of the request: the
benchmark counts how often it is not, against the server's own answers one at a time.

  serve_torch.py RUN --port N [--threads T] [--max-batch B]
Only POST /v1/completions (prompt, max_tokens, temperature, top_k, seed; no stream, no stop)
and GET /health.
"""
import argparse
import json
import os
import sys
import threading
import tomllib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpt_peer import build, load_safetensors  # noqa: E402

MASK = (1 << 64) - 1


def u_of(seed, pos):
    """A uniform double in [0, 1) from (seed, position): splitmix64, the top 53 bits."""
    z = (seed + (pos + 1) * 0x9E3779B97F4A7C15) & MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    z ^= z >> 31
    return (z >> 11) * (1.0 / (1 << 53))


def draw(logits, temperature, top_k, u):
    best = int(np.argmax(logits))  # the first maximum
    if temperature == 0:
        return best
    l = logits.astype(np.float64) / temperature
    keep = np.ones(len(l), dtype=bool)
    if 0 < top_k < len(l):
        order = np.argsort(-l, kind="stable")
        keep[:] = False
        keep[order[:top_k]] = True
    p = np.where(keep, np.exp(l - l[best]), 0.0)
    run = np.cumsum(p)
    hit = np.nonzero(run > u * run[-1])[0]
    return int(hit[0]) if len(hit) else int(np.nonzero(keep)[0][-1])


class Job:
    def __init__(self, req, tokens):
        self.req = req
        self.tokens = tokens
        self.prompt = len(tokens)
        self.done = threading.Event()


class Engine:
    def __init__(self, run, threads, max_batch):
        import torch
        self.torch = torch
        torch.set_num_threads(threads)
        with open(os.path.join(run, "config.toml"), "rb") as f:
            cfg = tomllib.load(f)
        m = cfg["model"]
        vocab = json.load(open(os.path.join(run, "vocabulary.json")))
        self.symbols = [chr(c) for c in vocab["symbols"]]
        self.index = {s: i for i, s in enumerate(self.symbols)}
        latest = open(os.path.join(run, "checkpoints", "latest")).read().strip()
        params = load_safetensors(os.path.join(run, "checkpoints", latest, "model.safetensors"))
        meta = {"n_embd": m["n_embd"], "n_head": m["n_head"], "n_layer": m["n_layer"], "bias": m.get("bias", False),
                "tie_weights": m.get("tie_weights", False), "vocab": len(self.symbols)}
        self.model = build(meta, params).eval()
        self.block = params["0.wpe"].shape[0]
        self.max_batch = max_batch
        self.lock = threading.Condition()
        self.waiting, self.active = [], []
        threading.Thread(target=self.loop, daemon=True).start()

    def submit(self, job):
        with self.lock:
            self.waiting.append(job)
            self.lock.notify()

    def loop(self):
        torch = self.torch
        while True:
            with self.lock:
                while not self.waiting and not self.active:
                    self.lock.wait()
                while self.waiting and len(self.active) < self.max_batch:
                    self.active.append(self.waiting.pop(0))
                batch = list(self.active)
            wins = [j.tokens[-self.block:] for j in batch]
            T = max(len(w) for w in wins)
            idx = torch.zeros(len(batch), T, dtype=torch.long)
            for b, w in enumerate(wins):
                idx[b, :len(w)] = torch.tensor(w)
            with torch.no_grad():
                logits = self.model(idx)
            for b, j in enumerate(batch):
                row = logits[b, len(wins[b]) - 1].numpy()
                t = draw(row, j.req["temperature"], j.req["top_k"], u_of(j.req["seed"], len(j.tokens)))
                j.tokens.append(t)
                if len(j.tokens) - j.prompt >= j.req["max_tokens"]:
                    j.done.set()
            with self.lock:
                self.active = [j for j in self.active if not j.done.is_set()]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("run")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--max-batch", type=int, default=64)
    a = ap.parse_args()
    eng = Engine(a.run, a.threads, a.max_batch)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def reply(self, status, body):
            b = (json.dumps(body, sort_keys=True, separators=(",", ":")) + "\n").encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(b)))
            self.end_headers()
            self.wfile.write(b)

        def do_GET(self):
            self.reply(200, {"status": "ok"})

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            req = {"max_tokens": body.get("max_tokens", 16), "temperature": float(body.get("temperature", 1.0)),
                   "top_k": body.get("top_k", 0), "seed": body.get("seed", 0)}
            tokens = [eng.index[c] for c in body["prompt"]]
            if req["max_tokens"] == 0:
                text = ""
            else:
                job = Job(req, tokens)
                eng.submit(job)
                job.done.wait()
                text = "".join(eng.symbols[t] for t in job.tokens[job.prompt:])
            self.reply(200, {"choices": [{"index": 0, "text": text, "finish_reason": "length"}]})

    srv = ThreadingHTTPServer(("127.0.0.1", a.port), Handler)
    srv.daemon_threads = True
    print("serve_torch: listening on 127.0.0.1:%d" % a.port, flush=True)
    srv.serve_forever()


if __name__ == "__main__":
    main()
