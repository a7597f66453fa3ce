#!/bin/bash
# Two step_bench binaries (e.g. built at two commits) on the MLP, CNN and GPT examples at 1 and
# 2 threads, interleaved: in each of ROUNDS rounds every configuration and thread count runs both
# binaries, the order alternating from round to round; then the table of docs/benchmarks.md:
# the medians, the ratio of the medians / the median of the rounds' own ratios (their range) /
# the ratio of the best runs (on a shared machine the best run is the least disturbed).
#   bench/step_compare.sh ROUNDS BEFORE AFTER [OUT.jsonl]
# e.g. bench/step_compare.sh 18 /tmp/before/step_bench build/bin/step_bench
set -eu
rounds=$1 before=$2 after=$3
out=${4:-$(mktemp)}
: > "$out"
cd "$(dirname "$0")/.."
for r in $(seq "$rounds"); do
  for cfg in fashion_mlp fashion_cnn fortunes_gpt; do
    steps=150; [ "$cfg" = fortunes_gpt ] && steps=30
    for t in 1 2; do
      w=0; [ "$t" -lt 2 ] && w=1
      order="before after"; [ $((r % 2)) = 0 ] && order="after before"
      for who in $order; do
        bin=$before; [ "$who" = after ] && bin=$after
        "$bin" --config "examples/$cfg.toml" --threads "$t" --workers "$w" --steps "$steps" --label "$who" |
          sed "s/^{/{\"round\": $r, /" >> "$out"
      done
    done
  done
done
/usr/bin/python3 - "$out" <<'PY'
import collections, json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
runs, pair = collections.defaultdict(list), collections.defaultdict(dict)
for r in rows:
    runs[(r["config"], r["threads"], r["framework"])].append(r["ms_per_step"])
    pair[(r["config"], r["threads"], r["round"])][r["framework"]] = r["ms_per_step"]
print("| step | threads | rounds | before ms (median) | after ms (median) | ratios |")
print("|---|---|---|---|---|---|")
for cfg in ("fashion_mlp", "fashion_cnn", "fortunes_gpt"):
    for t in (1, 2):
        b, a = runs[(cfg, t, "before")], runs[(cfg, t, "after")]
        ratios = sorted(p["after"] / p["before"] for k, p in pair.items() if k[0] == cfg and k[1] == t)
        mb, ma = statistics.median(b), statistics.median(a)
        print("| %s | %d | %d | %.3f | %.3f | %.2f / %.2f (%.2f–%.2f) / %.2f |" % (
            cfg, t, len(ratios), mb, ma, ma / mb, statistics.median(ratios), ratios[0], ratios[-1], min(a) / min(b)))
PY
