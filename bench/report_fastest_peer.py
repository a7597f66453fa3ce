#!/usr/bin/python3
"""The table of docs/benchmarks.md "Speed, round three" from a bench/fastest_peer.sh results directory:
bitgrad's best set-up ÷ PyTorch's fastest per workload and thread count, each with the ratio of
the medians, of the best runs, the spread over the rounds and the verdict against the goal.

  report_fastest_peer.py OUT_DIR     (then the full tables: report_peer.py OUT_DIR/peer peer)"""
import json
import os
import subprocess
import sys

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
import benchlib  # noqa: E402

out = sys.argv[1]
print(benchlib.machine_line(os.path.join(out, "machine.json")))
if os.path.exists(os.path.join(out, "time.txt")):
    print(open(os.path.join(out, "time.txt")).read().strip())
print()
print("FMA limit: the step's multiply-adds in matrix products ÷ the measured FMA peak per core × the threads "
      "(\"best\" rows: at 2 threads); bitgrad and PyTorch's fastest as multiples of it.\n")
print("| workload | threads | rounds | bitgrad ms | fastest PyTorch ms | ratio (median) | ratio (best runs) | spread | goal "
      "| FMA limit ms | bitgrad ÷ limit | PyTorch ÷ limit |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|")
GOALS = {"mlp": 0.70, "cnn": 0.75}
peak = benchlib.fma_peak_of(os.path.join(out, "machine.json")) or benchlib.fma_peak_of(os.path.join(out, "peer", "peer-machine.json"))


def limit(madds, t, st):
    return benchlib.limit_cells(benchlib.fma_limit_ms(madds, 2 if t == "best" else int(t), peak), st["ours_ms"], st["fastest_ms"])


peer = os.path.join(out, "peer", "peer.jsonl")
if os.path.exists(peer):
    by, seen, madds = {}, {}, {}
    for line in open(peer):
        if not line.strip():
            continue
        r = json.loads(line)
        model = r.get("model") or {"fashion_mlp": "mlp", "fashion_cnn": "cnn"}.get(r["config"], r["config"])
        k = (model, r["threads"], r["framework"])
        seen[k] = seen.get(k, 0) + 1
        by.setdefault(k, {})[r.get("round", seen[k])] = r["ms_per_step"]
        if r.get("multiply_adds"):
            madds[model] = r["multiply_adds"]
    for model in ("mlp", "cnn"):
        for t in (1, 2):
            ours = by.get((model, t, "bitgrad"))
            peers = {k[2]: v for k, v in by.items() if k[0] == model and k[1] == t and k[2] != "bitgrad"}
            st = benchlib.ratio_stats(ours, peers) if ours else None
            if st:
                print("| %s | %d | %d | %.3f | %.3f (%s) | %s | %s |" % (model.upper(), t, st["n"], st["ours_ms"], st["fastest_ms"], st["fastest"],
                                                                        benchlib.ratio_cells(st, GOALS[model]), limit(madds.get(model), t, st)))
        # bitgrad's faster thread count of each round ÷ PyTorch's fastest set-up at any thread count
        ours = {}
        for t in (1, 2):
            for r, v in by.get((model, t, "bitgrad"), {}).items():
                ours[r] = min(ours.get(r, v), v)
        peers = {"%s-t%d" % (k[2], k[1]): v for k, v in by.items() if k[0] == model and k[2] != "bitgrad"}
        st = benchlib.ratio_stats(ours, peers) if ours and all(by.get((model, t, "bitgrad")) for t in (1, 2)) else None
        if st:
            print("| %s | best | %d | %.3f | %.3f (%s) | %s | %s |" % (model.upper(), st["n"], st["ours_ms"], st["fastest_ms"], st["fastest"],
                                                                     benchlib.ratio_cells(st, GOALS[model]), limit(madds.get(model), "best", st)))
for name, label, goal in (("gpt", "GPT (fortunes)", 0.75), ("gpt_large", "GPT large (6×384, ctx 256, batch 64)", 0.8)):
    p = os.path.join(out, name, "gpt_peer.json")
    if not os.path.exists(p):
        continue
    j = json.load(open(p))
    cp = os.path.join(out, name, "count.json")
    gm = json.load(open(cp)).get("multiply_adds") if os.path.exists(cp) else None
    for t in ("1", "2", "best"):
        st = j.get("round_ratios", {}).get(t)
        if st:
            print("| %s | %s | %d | %.2f | %.2f (%s) | %s | %s |" % (label, t, st["n"], st["ours_ms"], st["fastest_ms"], st["fastest"],
                                                                   benchlib.ratio_cells(st, goal), limit(gm, t, st)))
if os.path.exists(peer):
    print()
    sys.stdout.flush()
    subprocess.run(["/usr/bin/python3", os.path.join(here, "report_peer.py"), os.path.join(out, "peer"), "peer"], check=False)
for name in ("gpt", "gpt_large"):
    p = os.path.join(out, name + ".txt")
    if os.path.exists(p):
        print("\n%s:\n" % name)
        print(open(p).read().strip())
