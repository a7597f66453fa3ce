#!/usr/bin/python3
"""The PyTorch side of the GPT peer benchmark (bench/gpt_peer.sh, docs/benchmarks.md).

Reads what bench/gpt_export.cpp wrote (the initial parameters, each step's batch and learning
rate, the validation windows, bitgrad's own run), builds the same character-level GPT in
PyTorch (float32): token + position embeddings, pre-norm blocks x + attn(ln1(x)), h + mlp(ln2(h))
with LayerNorm eps 1e-5 and no beta (bias = false), attention qkv = Linear(D, 3D) split q, k, v,
scores q k^T * (1/sqrt(D/H)), causal mask, softmax, @ v, Linear(D, D); mlp Linear(D, 4D) ->
exact (erf) GELU -> Linear(4D, D); a final LayerNorm; an untied Linear(D, V) head; no linear
biases. Trains on exactly bitgrad's batches with its learning rates: mean cross-entropy over the
positions and windows, AdamW (decay on parameters of >= 2 dims only), clip_grad_norm_(1.0), and
evaluates the same validation windows at the same steps.

  gpt_peer.py --data DIR --threads N [--steps S] [--time-only] [--out FILE.json] [--warmup W]
  gpt_peer.py --report DIR [--target R]
                               (the comparison of DIR's bitgrad*.json and torch*.json: prints it
                                and writes DIR/gpt_peer.json; every ratio bitgrad ÷ PyTorch's
                                fastest at the same thread count with its median, best and
                                spread over the rounds, and a verdict against R — bench/benchlib.py)
"""
import argparse
import glob
import json
import math
import os
import statistics
import struct
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402


def load_safetensors(path):
    with open(path, "rb") as f:
        b = f.read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])
    base = 8 + n
    dt = {"F32": np.float32, "F64": np.float64, "I64": np.int64}
    out = {}
    for k, v in h.items():
        if k == "__metadata__":
            continue
        a, e = v["data_offsets"]
        out[k] = np.frombuffer(b[base + a:base + e], dtype=dt[v["dtype"]]).reshape(v["shape"]).copy()
    return out


def build(meta, init):
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    D, H, L = meta["n_embd"], meta["n_head"], meta["n_layer"]
    assert not meta["bias"] and not meta["tie_weights"], "the peer models bias = false, tie_weights = false"

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1 = nn.Parameter(torch.ones(D))
            self.qkv = nn.Linear(D, 3 * D, bias=False)
            self.proj = nn.Linear(D, D, bias=False)
            self.ln2 = nn.Parameter(torch.ones(D))
            self.fc = nn.Linear(D, 4 * D, bias=False)
            self.out = nn.Linear(4 * D, D, bias=False)

        def forward(self, x):
            N, T, _ = x.shape
            E = D // H
            q, k, v = self.qkv(F.layer_norm(x, (D,), self.ln1, None, 1e-5)).split(D, dim=2)
            q = q.view(N, T, H, E).transpose(1, 2)
            k = k.view(N, T, H, E).transpose(1, 2)
            v = v.view(N, T, H, E).transpose(1, 2)
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(E))
            mask = torch.ones(T, T, dtype=torch.bool).tril()
            att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
            y = (att @ v).transpose(1, 2).contiguous().view(N, T, D)
            h = x + self.proj(y)
            return h + self.out(F.gelu(self.fc(F.layer_norm(h, (D,), self.ln2, None, 1e-5))))

    class GPT(nn.Module):
        def __init__(self, V, block):
            super().__init__()
            self.wte = nn.Parameter(torch.zeros(V, D))
            self.wpe = nn.Parameter(torch.zeros(block, D))
            self.blocks = nn.ModuleList([Block() for _ in range(L)])
            self.lnf = nn.Parameter(torch.ones(D))
            self.head = nn.Linear(D, V, bias=False)

        def forward(self, idx):
            T = idx.shape[1]
            x = self.wte[idx] + self.wpe[:T]
            for b in self.blocks:
                x = b(x)
            return self.head(F.layer_norm(x, (D,), self.lnf, None, 1e-5))

    model = GPT(meta["vocab"], init["0.wpe"].shape[0])
    # bitgrad's names (model->named_parameters(): layer index, then the layer's own names)
    names = {"wte": "0.wte", "wpe": "0.wpe", "lnf": "%d.gamma" % (L + 1), "head.weight": "%d.weight" % (L + 2)}
    for i in range(L):
        for t, s in [("ln1", "ln1.gamma"), ("qkv.weight", "attn_qkv.weight"), ("proj.weight", "attn_proj.weight"),
                     ("ln2", "ln2.gamma"), ("fc.weight", "mlp_fc.weight"), ("out.weight", "mlp_proj.weight")]:
            names["blocks.%d.%s" % (i, t)] = "%d.%s" % (i + 1, s)
    params = dict(model.named_parameters())
    assert set(names) == set(params), (set(names) ^ set(params))
    assert set(names.values()) == set(init), set(names.values()) ^ set(init)
    with torch.no_grad():
        for t, s in names.items():
            assert tuple(params[t].shape) == init[s].shape, (t, params[t].shape, s, init[s].shape)
            params[t].copy_(torch.from_numpy(init[s]))
    return model


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--steps", type=int, default=0, help="0: every step of the export")
    ap.add_argument("--time-only", action="store_true", help="no evaluation; times the steps")
    ap.add_argument("--out")
    ap.add_argument("--label", default="pytorch", help="the set-up (bench/torch_setups.sh)")
    ap.add_argument("--deterministic", action="store_true")
    ap.add_argument("--warmup", type=int, default=-1, help="steps left out of the median (default min(10, steps/10))")
    ap.add_argument("--report")
    ap.add_argument("--target", type=float, default=0.75, help="--report: the ratio goal (0.75; 0.8 for the large GPT)")
    a = ap.parse_args()
    if a.report:
        return report(a.report, a.target)

    import torch
    import torch.nn.functional as F

    torch.set_num_threads(a.threads)
    if a.deterministic:
        torch.use_deterministic_algorithms(True)
    meta = json.load(open(os.path.join(a.data, "bitgrad.json")))
    init = load_safetensors(os.path.join(a.data, "init.safetensors"))
    xs = np.load(os.path.join(a.data, "x.npy"))
    ys = np.load(os.path.join(a.data, "y.npy"))
    lrs = np.load(os.path.join(a.data, "lr.npy"))
    vx = torch.from_numpy(np.load(os.path.join(a.data, "val_x.npy")).astype(np.int64))
    vy = torch.from_numpy(np.load(os.path.join(a.data, "val_y.npy")).astype(np.int64))
    steps = a.steps or len(lrs)
    assert steps <= len(lrs), "the export has %d steps" % len(lrs)
    eval_at = set() if a.time_only else {s for s, _ in meta["val_loss"] if s <= steps} | {0, steps}

    model = build(meta, init)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": meta["weight_decay"]}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=float(lrs[0]), betas=(meta["beta1"], meta["beta2"]), eps=meta["eps"])
    V = meta["vocab"]

    def evaluate():
        # as bitgrad's Session::evaluate: batches of 100 windows, each window's mean over its
        # positions, summed, / windows
        model.eval()
        tot = 0.0
        with torch.no_grad():
            for i in range(0, len(vx), 100):
                lg = model(vx[i:i + 100])
                per = F.cross_entropy(lg.reshape(-1, V), vy[i:i + 100].reshape(-1), reduction="none").view(lg.shape[0], -1).mean(1)
                tot += float(per.double().sum())
        model.train()
        return tot / len(vx)

    evals, ms, losses, norms = [], [], [], []
    eval_s = 0.0
    for s in range(steps + 1):
        if s in eval_at:
            t0 = time.perf_counter()
            evals.append([s, evaluate()])
            eval_s += time.perf_counter() - t0
            print("gpt_peer: step %d  validation loss %.6f" % tuple(evals[-1]), file=sys.stderr)
        if s == steps:
            break
        t0 = time.perf_counter()
        x = torch.from_numpy(xs[s].astype(np.int64))
        y = torch.from_numpy(ys[s].astype(np.int64))
        for g in opt.param_groups:
            g["lr"] = float(lrs[s])
        opt.zero_grad(set_to_none=True)
        logits = model(x)
        loss = F.cross_entropy(logits.view(-1, V), y.view(-1))
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), meta["clip_grad_norm"])
        opt.step()
        ms.append((time.perf_counter() - t0) * 1000.0)
        losses.append(float(loss))
        norms.append(float(norm))
    warm = min(a.warmup if a.warmup >= 0 else min(10, len(ms) // 10), len(ms) - 1)
    env = {k: os.environ[k] for k in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "BLIS_NUM_THREADS", "BLIS_ARCH_TYPE", "LD_LIBRARY_PATH")
           if k in os.environ}
    res = {"framework": "pytorch", "label": a.label, "torch": torch.__version__, "env": env, "threads": a.threads, "steps": steps, "warmup": warm,
           "ms_per_step_median": statistics.median(ms[warm:]), "train_s": sum(ms) / 1000.0, "eval_s": eval_s,
           "val_loss": evals, "train_loss": losses, "grad_norm": norms, "ms": ms}
    if a.out:
        with open(a.out, "w") as f:
            json.dump(res, f)
    print("gpt_peer: %s, %d steps at %d threads: median %.3f ms per step" % (a.label, steps, a.threads, res["ms_per_step_median"]))


def report(d, target=0.75):
    """The comparison of a results directory of bench/gpt_peer.sh:
      export/bitgrad.json   bitgrad's run that wrote the data (its curve; its step times)
      torch-curve.json      PyTorch's run on the same data (its curve; its step times)
      time/SETUP-tN-rK.json the timing runs: bitgrad (gpt_export --time-only) and PyTorch set-ups
    prints the tables and writes DIR/gpt_peer.json."""
    def load(p):
        return json.load(open(p)) if os.path.exists(p) else None

    def med_after_warmup(r):
        ms = r["ms"]
        return ms[r.get("warmup", min(10, len(ms) // 10)):]

    bg = load(os.path.join(d, "export", "bitgrad.json"))
    tc = load(os.path.join(d, "torch-curve.json"))
    out = {"steps": bg["steps"], "config": bg["config"], "isa": bg["isa"], "bitgrad_fingerprint": bg["fingerprint"]}
    machine = os.path.join(d, "machine.txt")
    if os.path.exists(machine):
        out["machine"] = open(machine).read().strip().splitlines()
    lines = []
    if tc:
        tv = dict((s, v) for s, v in tc["val_loss"])
        rows = [(s, v, tv[s]) for s, v in bg["val_loss"] if s in tv]
        out["torch_curve_setup"] = {"label": tc.get("label"), "threads": tc["threads"], "torch": tc.get("torch"), "env": tc.get("env")}
        out["val_loss"] = [{"step": s, "bitgrad": b, "pytorch": t, "diff": b - t} for s, b, t in rows]
        early = [abs(b - t) for s, b, t in rows if s <= 200]
        out["max_abs_diff_first_200"] = max(early) if early else None
        last = rows[-1]
        out["final"] = {"step": last[0], "bitgrad": last[1], "pytorch": last[2], "diff": last[1] - last[2]}
        n = min(len(bg["train_loss"]), len(tc["train_loss"]))
        td = [abs(bg["train_loss"][i] - tc["train_loss"][i]) for i in range(n)]
        out["train_loss_max_abs_diff_first_k"] = {str(k): max(td[:k]) for k in (1, 10, 50, 200, 500, 1000, 2000) if k <= n}
        gd = [abs(bg["grad_norm"][i] - tc["grad_norm"][i]) / tc["grad_norm"][i] for i in range(n)]
        out["grad_norm_max_rel_diff_first_k"] = {str(k): max(gd[:k]) for k in (1, 10, 50, 200, 500, 1000, 2000) if k <= n}
        lines.append("validation loss (nats per token, %s windows), bitgrad (%d threads) vs PyTorch %s (%s, %d thread%s)" %
                     (bg.get("val_windows"), bg["threads"], tc.get("torch"), tc.get("label"), tc["threads"], "s" if tc["threads"] > 1 else ""))
        lines.append("%6s  %10s  %10s  %11s" % ("step", "bitgrad", "pytorch", "diff"))
        for s, b, t in rows:
            lines.append("%6d  %10.6f  %10.6f  %+11.3e" % (s, b, t, b - t))
        if early:
            lines.append("max |diff| at steps <= 200: %.3e" % out["max_abs_diff_first_200"])
        lines.append("final (step %d): bitgrad %.6f, pytorch %.6f, diff %+.3e" % (last[0], last[1], last[2], last[1] - last[2]))
        lines.append("training loss, max |diff| over the first k steps: " +
                     ", ".join("%s: %.2e" % kv for kv in out["train_loss_max_abs_diff_first_k"].items()))
        lines.append("gradient norm before clipping, max relative diff over the first k steps: " +
                     ", ".join("%s: %.2e" % kv for kv in out["grad_norm_max_rel_diff_first_k"].items()))
    # step times: every run's steps after its first 10, pooled per set-up and thread count
    pooled, per_run, fps, rounds = {}, {}, {}, {}
    for p in sorted(glob.glob(os.path.join(d, "time", "*.json"))):
        r = load(p)
        name = r.get("label", r.get("framework"))
        key = "%s-t%d" % (name, r["threads"])
        rnd = os.path.basename(p)[:-len(".json")].rsplit("-r", 1)[-1]
        rounds.setdefault((name, r["threads"]), {})[int(rnd) if rnd.isdigit() else len(rounds.get((name, r["threads"]), {})) + 1] = \
            r["ms_per_step_median"]
        pooled.setdefault(key, []).extend(med_after_warmup(r))
        per_run.setdefault(key, []).append(round(r["ms_per_step_median"], 3))
        if r.get("fingerprint"):
            fps[key] = fps.get(key, []) + [r["fingerprint"]]
    tab = {k: {"ms_per_step_median": statistics.median(v), "steps": len(v), "run_medians": per_run[k]} for k, v in pooled.items()}
    out["step_ms"] = tab
    out["curve_runs_step_ms"] = {"bitgrad-t%d" % bg["threads"]: statistics.median(med_after_warmup(bg))}
    if tc:
        out["curve_runs_step_ms"]["%s-t%d" % (tc.get("label"), tc["threads"])] = statistics.median(med_after_warmup(tc))
    if fps:
        out["bitgrad_timing_fingerprints"] = fps
    if tab:
        lines.append("median ms per step (timing runs; each run's steps after its warm-up, pooled):")
        for k in sorted(tab):
            lines.append("  %-22s %9.2f   (%d steps; run medians %s)" % (k, tab[k]["ms_per_step_median"], tab[k]["steps"], tab[k]["run_medians"]))
        torch_keys = [k for k in tab if not k.startswith("bitgrad")]
        if torch_keys:
            best = min(torch_keys, key=lambda k: tab[k]["ms_per_step_median"])
            out["torch_fastest"] = best
            out["ratios"] = {}
            for t in (1, 2):
                b = "bitgrad-t%d" % t
                if b not in tab:
                    continue
                same = [k for k in torch_keys if k.endswith("-t%d" % t)]
                r = {"vs_torch_fastest": tab[b]["ms_per_step_median"] / tab[best]["ms_per_step_median"]}
                lines.append("  %s / fastest PyTorch (%s, %.2f ms): %.2f" % (b, best, tab[best]["ms_per_step_median"], r["vs_torch_fastest"]))
                if same:
                    bs = min(same, key=lambda k: tab[k]["ms_per_step_median"])
                    r["vs_torch_fastest_same_threads"] = tab[b]["ms_per_step_median"] / tab[bs]["ms_per_step_median"]
                    r["torch_fastest_same_threads"] = bs
                    lines.append("  %s / fastest PyTorch at %d thread%s (%s, %.2f ms): %.2f" %
                                 (b, t, "s" if t > 1 else "", bs, tab[bs]["ms_per_step_median"], r["vs_torch_fastest_same_threads"]))
                out["ratios"][b] = r
        # the method (docs/benchmarks.md): each round's run medians; the ratio of the medians, of the best
        # runs and its spread at the same thread count
        mline = benchlib.machine_line(os.path.join(d, "machine.json"))
        out["machine_line"] = mline
        tbl = ["", mline, "",
               "bitgrad ÷ PyTorch's fastest set-up at the same thread count (%s; a run's median after its warm-up, "
               "median / best / spread over the rounds):" % (bg.get("config")), "",
               "| threads | rounds | bitgrad ms | fastest PyTorch ms | ratio (median) | ratio (best runs) | spread | target |",
               "|---|---|---|---|---|---|---|---|"]
        out["round_ratios"] = {}
        for t in (1, 2):
            ours = rounds.get(("bitgrad", t))
            peers = {n: v for (n, tt), v in rounds.items() if tt == t and n != "bitgrad"}
            st = benchlib.ratio_stats(ours, peers) if ours else None
            if st is None:
                continue
            st["verdict"] = benchlib.verdict(st, target)
            out["round_ratios"][str(t)] = st
            tbl.append("| %d | %d | %.2f | %.2f (%s) | %s |" % (t, st["n"], st["ours_ms"], st["fastest_ms"], st["fastest"],
                                                               benchlib.ratio_cells(st, target)))
        # bitgrad's best thread count of each round ÷ PyTorch's fastest set-up at any thread count
        ours = {}
        for t in (1, 2):
            for r, v in rounds.get(("bitgrad", t), {}).items():
                ours[r] = min(ours.get(r, v), v)
        peers = {"%s-t%d" % (n, tt): v for (n, tt), v in rounds.items() if n != "bitgrad"}
        st = benchlib.ratio_stats(ours, peers) if ours and all(("bitgrad", t) in rounds for t in (1, 2)) else None
        if st:
            st["verdict"] = benchlib.verdict(st, target)
            out["round_ratios"]["best"] = st
            tbl.append("| best | %d | %.2f | %.2f (%s) | %s |" % (st["n"], st["ours_ms"], st["fastest_ms"], st["fastest"],
                                                                 benchlib.ratio_cells(st, target)))
        lines.extend(tbl)
    lines.append("curve runs, median ms per step: " + ", ".join("%s %.2f" % kv for kv in out["curve_runs_step_ms"].items()))
    print("\n".join(lines))
    with open(os.path.join(d, "gpt_peer.json"), "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
