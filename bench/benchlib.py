"""What the benchmark reports share (docs/benchmarks.md, "the method"): the machine a table was measured on
(CPU vendor, family, model from /proc/cpuinfo; the load average at the start and the end of the
run) and the statistics of a ratio measured in interleaved rounds.

A ratio "bitgrad ÷ PyTorch's fastest" over R rounds, where every round ran every set-up once in
a rotating order:
  * median: the ratio of the medians, median(bitgrad) ÷ min over set-ups of median(set-up)
  * best:   the ratio of the best runs, min(bitgrad) ÷ min over set-ups of min(set-up)
  * rounds: each round's own ratio, bitgrad ÷ the fastest set-up of that round
  * spread: [lowest, highest] over the median, the best and the rounds' ratios
A target (ratio ≤ goal) is "met" when the median meets it, "within noise" when the median
misses it but the spread reaches it, "missed" otherwise.

The FMA-bound limit of a step: its multiply-adds in matrix products (step_bench's
`multiply_adds`: every GEMM call of a step, forward, both gradients, convolutions through their
lowering, attention's products) ÷ the FMA peak measured on the machine (bench/fma_peak.cpp, the
fastest of its ISAs, per core) × the threads. No step can beat it; elementwise work, the
optimizer and the loader are not counted, so the true bound is higher. Both sides' ratios to it
say how far each is from the hardware.

  benchlib.py machine FILE.json start|end [BUILD]   records /proc/cpuinfo's CPU and the load average
                                            in FILE.json (bench/run.sh, peer.sh, gpt_peer.sh); with
                                            BUILD at the start, also BUILD/bin/fma_peak's peak
  benchlib.py line FILE.json                prints the line machine_line() gives
"""
import json
import os
import statistics
import subprocess
import time
import sys


def median_ms(f, n=15):
    """The median wall time of n calls of f, in ms, after one untimed call."""
    f()
    ts = []
    for _ in range(n):
        t = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t)
    return sorted(ts)[len(ts) // 2] * 1e3


def cpu():
    """vendor, family, model and model name of the first CPU in /proc/cpuinfo."""
    want = {"vendor_id": "vendor", "cpu family": "family", "model": "model", "model name": "name"}
    out = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if not line.strip():
                    break  # the first processor's block
                k, _, v = line.partition(":")
                k = k.strip()
                if k in want and want[k] not in out:
                    out[want[k]] = v.strip()
    except OSError:
        pass
    out["cpus"] = os.cpu_count()
    return out


def loadavg():
    try:
        with open("/proc/loadavg") as f:
            return [float(x) for x in f.read().split()[:3]]
    except OSError:
        return None


def cpu_line(c=None):
    c = c or cpu()
    return "%s family %s model %s (%s), %s CPUs" % (c.get("vendor", "?"), c.get("family", "?"), c.get("model", "?"),
                                                  c.get("name", "?"), c.get("cpus", "?"))


def measure_fma_peak(build):
    """GFLOP/s per core (f32): the fastest ISA of BUILD/bin/fma_peak, or None without it."""
    exe = os.path.join(build, "bin", "fma_peak")
    if not os.path.exists(exe):
        return None
    res = subprocess.run([exe, "--benchmark_format=json"], capture_output=True, text=True, check=True)
    return max(b["GFLOPS"] / 1e9 for b in json.loads(res.stdout)["benchmarks"])


def fma_limit_ms(multiply_adds, threads, peak_gflops):
    """The FMA-bound limit of a step in ms: 2 flops per multiply-add at the peak on every thread."""
    if not multiply_adds or not peak_gflops:
        return None
    return 2.0 * multiply_adds / (peak_gflops * 1e9 * threads) * 1e3


def fma_peak_of(path):
    """The peak recorded in a machine JSON file by record(..., build), or None."""
    if path and os.path.exists(path):
        return json.load(open(path)).get("fma_peak_gflops")
    return None


def limit_cells(limit_ms, ours_ms, peer_ms):
    """limit | bitgrad ÷ limit | PyTorch ÷ limit, as markdown cells."""
    if not limit_ms:
        return "– | – | –"
    f = lambda x: "%.2f" % (x / limit_ms) if x else "–"
    return "%.3f | %s | %s" % (limit_ms, f(ours_ms), f(peer_ms))


def record(path, when, build=None):
    """path (a JSON file): the CPU, and the load average at `when` (start or end); with a build
    directory, the FMA peak its fma_peak measures."""
    m = {}
    if when != "start" and os.path.exists(path):
        m = json.load(open(path))
    m["cpu"] = cpu()
    m["load_" + when] = loadavg()
    if build:
        m["fma_peak_gflops"] = measure_fma_peak(build)
    with open(path, "w") as f:
        json.dump(m, f, indent=1)
    return m


def machine_line(path=None):
    """One line for the head of a table: the CPU and the load average (1, 5, 15 minutes) at the
    run's start (the JSON file `path` of record(), if there) and at its end (recorded, else now)."""
    m = {}
    if path and os.path.exists(path):
        m = json.load(open(path))
    fmt = lambda la: " / ".join("%.2f" % x for x in la) if la else "?"
    end = m.get("load_end") or loadavg()
    s = "CPU: " + cpu_line(m.get("cpu")) + "; load average (1/5/15 min) at start " + fmt(m.get("load_start")) + ", at end " + fmt(end)
    la = m.get("load_start") or [0]
    if max(la[0], (end or [0])[0]) > 0.5 * (m.get("cpu") or cpu()).get("cpus", 1) + 0.5:
        s += " — a loaded machine: these figures are not quiet-machine figures"
    return s


def ratio_stats(ours, peers):
    """ours: {round: ms}; peers: {setup: {round: ms}}. Returns the statistics above, or None."""
    peers = {s: v for s, v in peers.items() if v}
    if not ours or not peers:
        return None
    med = {s: statistics.median(v.values()) for s, v in peers.items()}
    fastest = min(med, key=med.get)
    best_peer = min(min(v.values()) for v in peers.values())
    r_med = statistics.median(ours.values()) / med[fastest]
    r_best = min(ours.values()) / best_peer
    rounds = {}
    for r, b in ours.items():
        same = [v[r] for v in peers.values() if r in v]
        if same:
            rounds[r] = b / min(same)
    allr = [r_med, r_best] + list(rounds.values())
    return {"median": r_med, "best": r_best, "rounds": [rounds[k] for k in sorted(rounds)], "spread": [min(allr), max(allr)],
            "fastest": fastest, "ours_ms": statistics.median(ours.values()), "fastest_ms": med[fastest], "n": len(ours)}


def verdict(st, goal):
    if st is None or goal is None:
        return "–"
    if st["median"] <= goal:
        return "met"
    if st["spread"][0] <= goal:
        return "within noise"
    return "missed"


def ratio_cells(st, goal):
    """median | best | spread (rounds) | verdict, as markdown cells."""
    if st is None:
        return "– | – | – | –"
    return "%.2f | %.2f | %.2f … %.2f (rounds: %s) | ≤ %s: %s" % (
        st["median"], st["best"], st["spread"][0], st["spread"][1], ", ".join("%.2f" % r for r in st["rounds"]), goal,
        verdict(st, goal))


if __name__ == "__main__":
    if len(sys.argv) in (4, 5) and sys.argv[1] == "machine":
        record(sys.argv[2], sys.argv[3], sys.argv[4] if len(sys.argv) == 5 else None)
    elif len(sys.argv) == 3 and sys.argv[1] == "line":
        print(machine_line(sys.argv[2]))
    elif len(sys.argv) == 2 and sys.argv[1] == "cpu":
        print(cpu_line())
    else:
        sys.exit(__doc__)
