#!/usr/bin/env bash
# The peer benchmark of docs/benchmarks.md: bitgrad against PyTorch (Debian's python3-torch,
# /usr/bin/python3) on the same models, data, batch and optimizer, one configuration per
# process, rotating the order every round. PyTorch runs with OpenBLAS and with BLIS as its BLAS
# (bench/torch_setups.sh), and with torch.use_deterministic_algorithms(True).
#   bench/peer.sh BUILD_DIR OUT_DIR        (bench/run.sh; PEER_REPS rounds, default 3;
#                                          PEER_MODELS, default "mlp cnn adder")
set -euo pipefail
build=$1
out=$2
reps=${PEER_REPS:-3}
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
  local steps=0
  # the adder: one epoch of 1000 batches, warm-up (10 steps) included, so that no epoch
  # boundary (bitgrad shuffles 10^7 sample ids there) falls inside the measured steps
  [ "$model" = adder ] && steps=990
  if [ "$who" = bitgrad ]; then
    # the loader on a worker thread when a CPU is left for it
    local w=0
    [ "$t" -lt "$(nproc)" ] && w=1
    "$build/bin/step_bench" --config "$cfg" --threads "$t" --workers "$w" --steps "$steps" >>"$res"
  else
    run_torch "$who" "$t" --model "$model" --steps "$steps" >>"$res"
  fi
}

setups=(bitgrad torch-openblas torch-blis torch-blis-skx torch-openblas-det torch-blis-skx-det)
[ -d "$blis_dir" ] || { echo "peer: $blis_dir missing (scripts/install-deps.sh installs libblis-openmp-dev); PyTorch with BLIS is left out" >&2; setups=(bitgrad torch-openblas torch-openblas-det); }
for r in $(seq 1 "$reps"); do
  for model in $models; do
    for t in 1 2; do
      # rotate the order of the set-ups every round
      n=${#setups[@]}
      for k in $(seq 0 $((n - 1))); do
        measure "${setups[$(((k + r) % n))]}" "$model" "$t"
      done
    done
  done
  echo "peer: round $r of $reps done" >&2
done
