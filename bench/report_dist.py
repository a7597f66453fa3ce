#!/usr/bin/env python3
"""Tables of bench/dist.sh's results (docs/distributed_bench.md): the combine (combine.jsonl,
one line per rank count and payload from dist_combine_bench) and the data-parallel training
step (train.jsonl, one line per process). Usage: report_dist.py RESULTS_DIR"""
import json
import os
import statistics
import sys

out = sys.argv[1]


def cpu():
    info = {}
    try:
        for line in open(os.path.join(out, "machine.txt")):
            if ":" in line and not line.startswith(" "):
                k, v = line.split(":", 1)
                info.setdefault(k.strip(), v.strip())
    except OSError:
        return "unknown CPU"
    return f"{info.get('Model name', '?')} (family {info.get('CPU family', '?')}, model {info.get('Model', '?')}), {info.get('CPU(s)', '?')} cores"


print(f"CPU: {cpu()}")
combine = os.path.join(out, "combine.jsonl")
if os.path.exists(combine):
    rows = [json.loads(l) for l in open(combine) if l.strip()]
    print()
    print("Combine: median ms over repetitions of the slowest rank's time (min in brackets); "
          "ratio = tree ÷ MPI_Allreduce")
    print()
    print("| ranks | payload (floats) | reps | tree_allreduce ms | MPI_Allreduce ms | ratio | tree GB/s | MPI GB/s | tree bytes equal on all ranks |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        over = " (oversubscribed)" if r["ranks"] > (os.cpu_count() or 1) else ""
        print(f"| {r['ranks']}{over} | {r['floats']:,} | {r['reps']} | {r['tree_ms']:.3f} ({r['tree_min_ms']:.3f}) | "
              f"{r['mpi_ms']:.3f} ({r['mpi_min_ms']:.3f}) | {r['ratio']:.2f} | {r['tree_GBps']:.2f} | {r['mpi_GBps']:.2f} | "
              f"{'yes' if r['identical'] else 'NO'} |")

train = os.path.join(out, "train.jsonl")
if os.path.exists(train):
    rows = [json.loads(l) for l in open(train) if l.strip()]
    order = []
    for r in rows:
        if r["setup"] not in order:
            order.append(r["setup"])
    order.sort(key=lambda s: (int(s.split("-")[0][1:]), s))
    fps = {r["fingerprint"] for r in rows}
    print()
    print("Training: median over rounds; wall = the whole command (start-up, data loading, MPI start, "
          "checkpoint); samples/s = the run's last progress line (training loop only)")
    print()
    print("| set-up | trace | rounds | wall s | train s | samples/s | samples/s ÷ 1 process 1 thread | fingerprints |")
    print("|---|---|---|---|---|---|---|---|")
    base = {}
    for trace in ("steps", "none"):
        sel = [r for r in rows if r["setup"] == "p1-t1" and r["trace"] == trace and r["samples_per_s"]]
        if sel:
            base[trace] = statistics.median(r["samples_per_s"] for r in sel)
    for trace in ("steps", "none"):
        for s in order:
            sel = [r for r in rows if r["setup"] == s and r["trace"] == trace]
            if not sel:
                continue
            p, t = s.split("-")
            ranks = int(p[1:])
            name = f"1 process, {t[1:]} thread(s)" if ranks == 1 else f"mpirun -n {ranks}, 1 thread each"
            if ranks > (os.cpu_count() or 1):
                name += " (oversubscribed)"
            sps = [r["samples_per_s"] for r in sel if r["samples_per_s"]]
            tr = [r["train_s"] for r in sel if r["train_s"] is not None]
            msps = statistics.median(sps) if sps else 0
            rel = f"{msps / base[trace]:.2f}" if trace in base and base[trace] else "–"
            fp = {r["fingerprint"] for r in sel}
            fps_cell = next(iter(fp))[:16] + "…" if len(fp) == 1 else f"{len(fp)} different"
            print(f"| {name} | {trace} | {len(sel)} | {statistics.median(r['wall_s'] for r in sel):.2f} | "
                  f"{statistics.median(tr):.2f} | {msps:,.0f} | {rel} | {fps_cell} |" if tr else "")
    print()
    print(f"fingerprints over all {len(rows)} runs: {'all identical ' + next(iter(fps)) if len(fps) == 1 else str(len(fps)) + ' different: ' + ', '.join(sorted(fps))}")
