# PyTorch set-ups of the peer benchmark, sourced by bench/peer.sh and bench/scaling.sh.
#   run_torch SETUP THREADS ARGS...   runs bench/peer_torch.py ARGS in SETUP's environment
# Set-ups (a -det suffix adds torch.use_deterministic_algorithms(True)):
#   torch-openblas   Debian's default BLAS; OpenBLAS fixes its thread count when it is loaded,
#                    so OPENBLAS_NUM_THREADS is set per process
#   torch-blis       BLIS (OpenMP build) as libblas.so.3, its own choice of kernels; BLIS 0.9
#                    does not know Zen 5 and picks its 'generic' kernels there
#   torch-blis-skx   the same with BLIS_ARCH_TYPE=0, which forces BLIS's AVX-512 'skx' kernels
blis_dir=/usr/lib/x86_64-linux-gnu/blis-openmp
# BLIS's skx kernels are AVX-512: on a CPU without it (a Zen 1-3) they die with SIGILL, so the
# *-skx set-ups are left out there, by name (runnable_setups), and BLIS_ARCH_TYPE=0 is not set
# for the other harnesses (blis_skx_env).
has_avx512=0
grep -qw avx512f /proc/cpuinfo && has_avx512=1
runnable_setups() {  # SETUP... -> the ones this CPU can run, on stdout; the others named on stderr
  local s kept=()
  for s in "$@"; do
    if [ "$has_avx512" = 0 ] && [[ $s == *skx* ]]; then
      echo "bench: set-up $s skipped: BLIS's skx kernels need AVX-512, which this CPU lacks" >&2
    else
      kept+=("$s")
    fi
  done
  echo "${kept[*]}"
}
blis_skx_env() {  # the environment that forces BLIS's skx kernels where the CPU has them
  [ "$has_avx512" = 1 ] && echo BLIS_ARCH_TYPE=0 || echo BLIS_ARCH_TYPE_UNSET=1
}
peer_py="$(dirname "${BASH_SOURCE[0]}")/peer_torch.py"

run_torch() {
  local setup=$1 t=$2
  shift 2
  local det=()
  case $setup in *-det) det=(--deterministic) ;; esac
  case ${setup%-det} in
    torch-openblas)
      env -u LD_LIBRARY_PATH OPENBLAS_NUM_THREADS="$t" OMP_NUM_THREADS="$t" \
        /usr/bin/python3 "$peer_py" --threads "$t" "${det[@]}" --label "$setup" "$@" ;;
    torch-blis)
      env -u BLIS_ARCH_TYPE LD_LIBRARY_PATH="$blis_dir" BLIS_NUM_THREADS="$t" OMP_NUM_THREADS="$t" \
        /usr/bin/python3 "$peer_py" --threads "$t" "${det[@]}" --label "$setup" "$@" ;;
    torch-blis-skx)
      env BLIS_ARCH_TYPE=0 LD_LIBRARY_PATH="$blis_dir" BLIS_NUM_THREADS="$t" OMP_NUM_THREADS="$t" \
        /usr/bin/python3 "$peer_py" --threads "$t" "${det[@]}" --label "$setup" "$@" ;;
    *)
      echo "run_torch: unknown set-up $setup" >&2
      return 2 ;;
  esac
}
