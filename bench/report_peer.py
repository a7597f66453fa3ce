#!/usr/bin/python3
"""Tables of the peer benchmark (bench/peer.sh) and the scaling sweep (bench/scaling.sh) for
docs/benchmarks.md: medians over rounds, ratios against PyTorch's fastest set-up measured in the
same run, and the targets (MLP ≤ 0.70, CNN ≤ 0.75 at 1 and 2 threads). Every ratio
has its median, its best and its spread over the rounds, and a verdict met / within noise /
missed (bench/benchlib.py); every table is headed by the CPU and the load average.

  report_peer.py OUT_DIR best      prints the fastest PyTorch set-up for the MLP at 1 and 2 threads
  report_peer.py OUT_DIR peer      prints the peer tables
  report_peer.py OUT_DIR scaling   prints the scaling table and writes OUT_DIR/scaling/ (a run
                                   directory `bitgrad report` draws: manifest.json, scaling.json)
"""
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402

out, what = sys.argv[1], sys.argv[2]
TORCH = ["torch-openblas", "torch-blis", "torch-blis-skx", "torch-openblas-det", "torch-blis-skx-det"]
FAST = ("torch-openblas", "torch-blis", "torch-blis-skx")


def load(name):
    path = os.path.join(out, name)
    rows = []
    for line in open(path):
        line = line.strip()
        if line:
            rows.append(json.loads(line))
    return rows


def key_model(r):
    return r.get("model") or {"fashion_mlp": "mlp", "fashion_cnn": "cnn", "adder": "adder"}[r["config"]]


def medians(rows, keyf):
    groups = {}
    for r in rows:
        groups.setdefault(keyf(r), []).append(r)
    return {k: {"ms": statistics.median(x["ms_per_step"] for x in v), "sps": statistics.median(x["samples_per_s"] for x in v),
                "rss": statistics.median(x["peak_rss_mb"] for x in v), "n": len(v)} for k, v in groups.items()}


def peer_medians():
    return medians(load("peer.jsonl"), lambda r: (key_model(r), r["threads"], r["framework"]))


def peak():
    return benchlib.fma_peak_of(os.path.join(out, "peer-machine.json")) or benchlib.fma_peak_of(os.path.join(out, "machine.json"))


def multiply_adds(rows, keyf):
    """{key: the step's multiply-adds} from bitgrad's lines (step_bench)."""
    return {keyf(r): r["multiply_adds"] for r in rows if r.get("multiply_adds")}


def peer_rounds():
    """{(model, threads, set-up): {round: ms}}; lines without a round (older runs) count their
    occurrences instead."""
    by, seen = {}, {}
    for r in load("peer.jsonl"):
        k = (key_model(r), r["threads"], r["framework"])
        seen[k] = seen.get(k, 0) + 1
        by.setdefault(k, {})[r.get("round", seen[k])] = r["ms_per_step"]
    return by


def best_torch(m, model, t, allowed=FAST):
    c = [(m[(model, t, s)]["ms"], s) for s in allowed if (model, t, s) in m]
    return min(c) if c else (None, None)


if what == "best":
    m = peer_medians()
    print(best_torch(m, "mlp", 1)[1] or "torch-openblas", best_torch(m, "mlp", 2)[1] or "torch-openblas")
elif what == "peer":
    m = peer_medians()
    targets = {"mlp": 0.70, "cnn": 0.75, "adder": None}  # the goals (earlier ones were 0.77 / 0.8)
    print(benchlib.machine_line(os.path.join(out, "peer-machine.json")) + "\n")
    print("Median ms per step (samples/s over the measured steps in brackets); rounds per cell: "
          + str(min(v["n"] for v in m.values())) + ".\n")
    madds = multiply_adds(load("peer.jsonl"), key_model)
    pk = peak()
    print("FMA limit: the step's multiply-adds in matrix products ÷ the measured FMA peak ("
          + ("%.1f GFLOP/s per core" % pk if pk else "not measured") + ") × the threads; each side as a multiple of it.\n")
    print("| model | threads | bitgrad | " + " | ".join(TORCH) + " | bitgrad ÷ fastest PyTorch | target | FMA limit ms | bitgrad ÷ limit | fastest PyTorch ÷ limit |")
    print("|---|---|---|" + "---|" * len(TORCH) + "---|---|---|---|---|")
    for model in ["mlp", "cnn", "adder"]:
        for t in [1, 2]:
            b = m.get((model, t, "bitgrad"))
            if not b:
                continue
            cells = []
            for s in TORCH:
                v = m.get((model, t, s))
                cells.append(f"{v['ms']:.3f} ({v['sps']:,.0f})" if v else "–")
            best_ms, best = best_torch(m, model, t, TORCH)
            ratio = b["ms"] / best_ms if best_ms else float("nan")
            tgt = targets[model]
            rr = peer_rounds()
            st = benchlib.ratio_stats(rr.get((model, t, "bitgrad"), {}), {s: rr[(model, t, s)] for s in TORCH if (model, t, s) in rr})
            verdict = "–" if tgt is None else f"≤ {tgt}: {benchlib.verdict(st, tgt)}"
            lim = benchlib.limit_cells(benchlib.fma_limit_ms(madds.get(model), t, pk), b["ms"], best_ms)
            print(f"| {model} | {t} | {b['ms']:.3f} ({b['sps']:,.0f}) | " + " | ".join(cells) + f" | {ratio:.2f} ({best}) | {verdict} | {lim} |")
    print("\nPeak resident memory (MB, median):\n")
    print("| model | threads | bitgrad | " + " | ".join(TORCH) + " | bitgrad ÷ smallest PyTorch |")
    print("|---|---|---|" + "---|" * len(TORCH) + "---|")
    for model in ["mlp", "cnn", "adder"]:
        for t in [1, 2]:
            b = m.get((model, t, "bitgrad"))
            if not b:
                continue
            cells = [f"{m[(model, t, s)]['rss']:.0f}" if (model, t, s) in m else "–" for s in TORCH]
            small = min((m[(model, t, s)]["rss"] for s in TORCH if (model, t, s) in m), default=float("nan"))
            print(f"| {model} | {t} | {b['rss']:.0f} | " + " | ".join(cells) + f" | {b['rss'] / small:.2f} |")
    rounds = peer_rounds()
    print("\nbitgrad ÷ PyTorch's fastest set-up, over the rounds (median: the ratio of the medians; best: of the best "
          "runs; spread: the lowest and highest of these and of each round's own ratio; met only when the median meets "
          "the target, within noise when the spread reaches it):\n")
    print("| model | threads | rounds | bitgrad ms | fastest PyTorch ms | ratio (median) | ratio (best runs) | spread | target |")
    print("|---|---|---|---|---|---|---|---|---|")
    for model in ["mlp", "cnn", "adder"]:
        for t in [1, 2]:
            ours = rounds.get((model, t, "bitgrad"))
            if not ours:
                continue
            peers = {s: rounds[(model, t, s)] for s in TORCH if (model, t, s) in rounds}
            st = benchlib.ratio_stats(ours, peers)
            if st is None:
                continue
            print(f"| {model} | {t} | {st['n']} | {st['ours_ms']:.3f} | {st['fastest_ms']:.3f} ({st['fastest']}) | "
                  + benchlib.ratio_cells(st, targets[model]) + " |")
elif what == "scaling":
    rows = load("scaling.jsonl")
    m = medians(rows, lambda r: (r["framework"] if r["framework"] == "bitgrad" else "pytorch", r["threads"], r["batch"], r["width"]))
    madds = multiply_adds(rows, lambda r: (r["batch"], r["width"]))
    pk = peak()
    setups = {r["threads"]: r["framework"] for r in rows if r["framework"] != "bitgrad"}
    print("MLP 784-W-W-10 training step, median ms over 100 steps; PyTorch set-up: "
          + ", ".join(f"{t} thread{'s' if t > 1 else ''}: {s}" for t, s in sorted(setups.items())) + ".\n")
    print("FMA limit: the step's multiply-adds in matrix products ÷ the measured FMA peak ("
          + ("%.1f GFLOP/s per core" % pk if pk else "not measured") + ") × the threads; each side as a multiple of it.\n")
    print("| batch | width | bitgrad 1 thread | PyTorch 1 thread | ratio | FMA limit 1 thread | bitgrad ÷ limit | PyTorch ÷ limit "
          "| bitgrad 2 threads | PyTorch 2 threads | ratio | FMA limit 2 threads | bitgrad ÷ limit | PyTorch ÷ limit |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    points = sorted({(k[2], k[3]) for k in m}, key=lambda p: (p[1] != 512, p[1], p[0]))
    for b, w in points:
        cells = []
        for t in [1, 2]:
            x, y = m.get(("bitgrad", t, b, w)), m.get(("pytorch", t, b, w))
            cells += [f"{x['ms']:.3f}" if x else "–", f"{y['ms']:.3f}" if y else "–", f"{x['ms'] / y['ms']:.2f}" if x and y else "–",
                      benchlib.limit_cells(benchlib.fma_limit_ms(madds.get((b, w)), t, pk), x and x["ms"], y and y["ms"])]
        print(f"| {b} | {w} | " + " | ".join(cells) + " |")
    # a run directory for `bitgrad report`
    d = os.path.join(out, "scaling")
    os.makedirs(d, exist_ok=True)
    manifest = json.load(open(os.path.join(out, "env.json")))
    manifest["run"] = {"kind": "scaling", "config": "examples/fashion_mlp.toml (widths and batches varied)", "command": "make bench"}
    points = [{"framework": k[0], "threads": k[1], "batch": k[2], "width": k[3], "ms_per_step": v["ms"]} for k, v in sorted(m.items())]
    with open(os.path.join(d, "scaling.json"), "w") as f:
        json.dump({"pytorch_setups": {str(t): s for t, s in setups.items()}, "points": points}, f, indent=1)
    with open(os.path.join(d, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=2)
