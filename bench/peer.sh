#!/usr/bin/env bash
# The peer benchmark of docs/benchmarks.md: bitgrad against PyTorch (Debian's python3-torch,
# /usr/bin/python3) on the same models, data, batch and optimizer, one configuration per
# process, rotating the order every round. PyTorch runs with OpenBLAS and with BLIS as its BLAS
# (bench/torch_setups.sh), and with torch.use_deterministic_algorithms(True).
#   bench/peer.sh BUILD_DIR OUT_DIR        (bench/run.sh; PEER_REPS rounds, default 5;
#                                          PEER_MODELS, default "mlp cnn adder";
#                                          PEER_SETUPS, default every set-up below;
#                                          PEER_STEPS timed steps per process, default 0 = one epoch;
#                                          PEER_THREADS, default "1 2")
# Every line of OUT_DIR/peer.jsonl carries its round, so that bench/report_peer.py can give each
# ratio its median, its best and its spread over the rounds (bench/benchlib.py);
# OUT_DIR/peer-machine.json holds the CPU and the load average at the start and the end.
set -euo pipefail
build=$1
out=$2
reps=${PEER_REPS:-5}
peer_steps=${PEER_STEPS:-0}
models=${PEER_MODELS:-mlp cnn adder}
here=$(dirname "$0")
mkdir -p "$out"
res="$out/peer.jsonl"
: >"$res"

source "$here/torch_setups.sh"

# one measurement: bitgrad or a PyTorch set-up, model, threads
measure() {
  local who=$1 model=$2 t=$3
  local cfg
  case $model in
    mlp) cfg=examples/fashion_mlp.toml ;;
    cnn) cfg=examples/fashion_cnn.toml ;;
    adder) cfg=examples/adder.toml ;;
  esac
  local steps=$peer_steps
  # the adder: one epoch of 1000 batches, warm-up (10 steps) included, so that no epoch
  # boundary (bitgrad shuffles 10^7 sample ids there) falls inside the measured steps
  [ "$model" = adder ] && [ "$steps" = 0 ] && steps=990
  # the round goes into the line: {"round": R, ...}
  local tag="s/^{/{\"round\": $r, /"
  if [ "$who" = bitgrad ]; then
    # the loader on a worker thread when a CPU is left for it
    local w=0
    [ "$t" -lt "$(nproc)" ] && w=1
    "$build/bin/step_bench" --config "$cfg" --threads "$t" --workers "$w" --steps "$steps" | sed "$tag" >>"$res"
  else
    run_torch "$who" "$t" --model "$model" --steps "$steps" | sed "$tag" >>"$res"
  fi
}

read -r -a setups <<<"${PEER_SETUPS:-bitgrad torch-openblas torch-blis torch-blis-skx torch-openblas-det torch-blis-skx-det}"
read -r -a setups <<<"$(runnable_setups "${setups[@]}")"
if [ ! -d "$blis_dir" ]; then
  echo "peer: $blis_dir missing (scripts/install-deps.sh installs libblis-openmp-dev); PyTorch with BLIS is left out" >&2
  read -r -a setups <<<"$(tr ' ' '\n' <<<"${setups[*]}" | grep -v blis | tr '\n' ' ')"
fi
/usr/bin/python3 "$here/benchlib.py" machine "$out/peer-machine.json" start "$build"
for r in $(seq 1 "$reps"); do
  for model in $models; do
    for t in ${PEER_THREADS:-1 2}; do
      # rotate the order of the set-ups every round
      n=${#setups[@]}
      for k in $(seq 0 $((n - 1))); do
        measure "${setups[$(((k + r) % n))]}" "$model" "$t"
      done
    done
  done
  echo "peer: round $r of $reps done" >&2
done
/usr/bin/python3 "$here/benchlib.py" machine "$out/peer-machine.json" end
