#!/usr/bin/env bash
# Data parallel across hosts over a real network (docs/distributed.md "Across hosts"): three
# network namespaces made here, each a host with an address of its own behind a veth pair on a
# bridge, OpenMPI started across them by its own launcher (an rsh agent that enters the host's
# namespace and UTS namespace), the ranks talking over TCP only. Checked:
#   - one process, 2 hosts x 1 rank and 2 hosts x 2 ranks give the same fingerprint, and bytes
#     crossed the hosts' links;
#   - with 50 ms of delay and 1% loss on the link between two hosts the same fingerprint (tc
#     netem, or where the kernel lacks it a link carried in user space: lossy_link.py);
#   - a host's link cut mid-run ends the job within seconds with OpenMPI's message naming the
#     host, and the run resumes from its last checkpoint on the 2 remaining hosts with the bits of a
#     straight run.
# Needs root (namespaces); exits 77 (skipped) with a message where namespaces, bridges or veth
# pairs cannot be made.
# Usage: hosts_netns.sh BITGRAD MPIRUN WORKDIR [--bench DIST_COMBINE_BENCH]
# With --bench, no checks: the deterministic combine's cost (bench/dist_combine_bench.cpp) on 2
# ranks over TCP between two hosts, then on 2 ranks of one host over shared memory (make bench-dist-hosts).
set -uo pipefail
bin=$1 mpirun=$2 work=$3 bench=${5:-}
here=$(cd "$(dirname "$0")" && pwd)
skip() { echo "DistHosts: skipped: $*"; exit 77; }
fail() { echo "DistHosts: FAILED: $*"; exit 1; }
[ "$(id -u)" = 0 ] || skip "not root: network namespaces need CAP_SYS_ADMIN"
command -v ip >/dev/null || skip "no ip (iproute2)"
tag=bg$(($$ % 100000))
net=10.$((200 + $$ % 50)).$(($$ % 250))
ip netns add "${tag}h1" 2>/dev/null || skip "cannot make a network namespace ($(ip netns add "${tag}h1" 2>&1))"

cleanup() {
  for h in 1 2 3; do
    for p in $(ip netns pids "${tag}h$h" 2>/dev/null); do kill -9 "$p" 2>/dev/null; done
    ip netns del "${tag}h$h" 2>/dev/null
  done
  ip link del "${tag}br" 2>/dev/null
}
trap cleanup EXIT
ip link add "${tag}br" type bridge 2>/dev/null || skip "cannot make a bridge ($(ip link add "${tag}br" type bridge 2>&1))"
ip addr add "$net.1/24" dev "${tag}br"
ip link set "${tag}br" up
for h in 1 2 3; do
  [ "$h" = 1 ] || ip netns add "${tag}h$h"
  ip link add "${tag}v$h" type veth peer name "${tag}p$h" 2>/dev/null || skip "cannot make a veth pair ($(ip link add "${tag}v$h" type veth peer name "${tag}p$h" 2>&1))"
  ip link set "${tag}v$h" master "${tag}br"
  ip link set "${tag}v$h" up
  ip link set "${tag}p$h" netns "${tag}h$h"
  ip netns exec "${tag}h$h" ip addr add "$net.$((10 + h))/24" dev "${tag}p$h"
  ip netns exec "${tag}h$h" ip link set "${tag}p$h" up
  ip netns exec "${tag}h$h" ip link set lo up  # OpenMPI's processes on one host talk over it
done

# OpenMPI's rsh agent: "agent HOST COMMAND": COMMAND in HOST's network namespace, under its name
rm -rf "$work" && mkdir -p "$work" && cd "$work" || fail "no work directory $work"
cat >agent <<EOF
#!/bin/sh
host=\$1; shift
h=\$(( \${host##*.} - 10 ))
exec ip netns exec "${tag}h\$h" unshare --uts /bin/sh -c "hostname host\$h; \$*"
EOF
chmod +x agent
# TCP only, on the hosts' network; keepalives on mpirun's links to its daemons, so that a host
# that disappears ends the job in seconds (the default waits 300 s before the first probe)
mpi=("$mpirun" --allow-run-as-root --oversubscribe --bind-to none --mca plm_rsh_agent "$work/agent" --mca plm_rsh_no_tree_spawn 1
  --mca btl tcp,self --mca btl_tcp_if_include "$net.0/24" --mca oob_tcp_if_include "$net.0/24"
  --mca oob_tcp_keepalive_time 2 --mca oob_tcp_keepalive_intvl 1 --mca oob_tcp_keepalive_probes 3)
hosts() { local s="" h; for h in "$@"; do s="$s,$net.$((10 + ${h%:*})):${h#*:}"; done; echo "${s#,}"; }
cp "$here/synth.toml" s.toml  # the model of DistTrain.* (tests/dist/train_ranks_test.cpp)
fingerprint() { awk '/^fingerprint/ {print $2}' "$1"; }
bytes() { cat "/sys/class/net/${tag}v$1/statistics/tx_bytes"; }
ranks() {  # ranks LOG HOSTS P ARGS...: `bitgrad train s.toml ARGS` across the hosts, bounded
  local log=$1 list=$2 p=$3
  shift 3
  timeout -k 5 120 "${mpi[@]}" --host "$list" -n "$p" "$bin" train s.toml --no-progress "$@" >"$log.out" 2>"$log.err"
}

if [ -n "$bench" ]; then
  {
    echo "TCP between two hosts (2 hosts x 1 rank, --mca btl tcp,self):"
    timeout 600 "${mpi[@]}" --host "$(hosts 1:1 2:1)" -n 2 "$bench" --reps 30 --warmup 3 || fail "the bench over TCP"
    echo "shared memory on one host (2 ranks, OpenMPI's vader):"
    timeout 600 "$mpirun" --allow-run-as-root --oversubscribe --bind-to none --mca btl vader,self -n 2 "$bench" --reps 30 --warmup 3 ||
      fail "the bench over shared memory"
  }
  exit 0
fi
timeout 120 "$bin" train s.toml --out one --no-progress --steps 9 >one.out 2>one.err || fail "one process: $(tail -3 one.err)"
want=$(fingerprint one.out)
before=$(bytes 2)
ranks two "$(hosts 1:1 2:1)" 2 --out two --steps 9 || fail "2 hosts x 1 rank: $(tail -5 two.err)"
[ "$(fingerprint two.out)" = "$want" ] || fail "2 hosts x 1 rank: $(fingerprint two.out), one process: $want"
grep -q "ranks     2 (MPI, on host1, host2)" two.out || fail "the ranks were not on two hosts: $(grep '^ranks' two.out)"
crossed=$(($(bytes 2) - before))
[ "$crossed" -gt 10000 ] || fail "only $crossed bytes crossed host 2's link"
ranks four "$(hosts 1:2 2:2)" 4 --out four --steps 9 || fail "2 hosts x 2 ranks: $(tail -5 four.err)"
[ "$(fingerprint four.out)" = "$want" ] || fail "2 hosts x 2 ranks: $(fingerprint four.out), one process: $want"
echo "DistHosts: one process, 2 hosts x 1 rank, 2 hosts x 2 ranks over TCP: fingerprint $want ($crossed bytes over host 2's link)"

# a host's link cut mid-run: the job ends in bounded time, naming the host; the run resumes on two.
# It is cut once a checkpoint past step 0 is the latest (older ones are pruned as new ones come:
# at ~200 steps a second a given one lives for milliseconds)
"${mpi[@]}" --host "$(hosts 1:1 2:1 3:1)" -n 3 "$bin" train s.toml --out cut --no-progress --steps 100000 --checkpoint-every 4 \
  --dist-timeout 10 >cut.out 2>cut.err &
job=$!
past0() { [ -e cut/checkpoints/latest ] && [ "$(cat cut/checkpoints/latest)" != step-000000000 ]; }
for _ in $(seq 600); do past0 && break; sleep 0.1; done
past0 || { kill -9 $job; fail "the 3-host run wrote no checkpoint past step 0 in 60 s: $(tail -5 cut.err)"; }
ip link set "${tag}v3" down
start=$SECONDS
for _ in $(seq 600); do kill -0 $job 2>/dev/null || break; sleep 0.1; done
if kill -0 $job 2>/dev/null; then kill -9 $job; fail "the job did not end within 60 s of the cut"; fi
wait $job
code=$?
took=$((SECONDS - start))
[ "$code" -ne 0 ] || fail "the job with a cut link exited 0"
grep -q "lost communication with a remote daemon" cut.err || grep -q "without an answer from the other ranks" cut.err ||
  fail "no message naming the lost host: $(tail -8 cut.err)"
last=$(sed 's/step-0*//' cut/checkpoints/latest)
to=$((last + 13))
timeout 120 "$bin" train s.toml --out straight --no-progress --steps "$to" >straight.out 2>straight.err || fail "the straight run: $(tail -3 straight.err)"
ranks resumed "$(hosts 1:1 2:1)" 2 --resume cut --steps "$to" || fail "the resume on 2 hosts: $(tail -5 resumed.err)"
[ "$(fingerprint resumed.out)" = "$(fingerprint straight.out)" ] || fail "resumed on 2 hosts: $(fingerprint resumed.out), straight: $(fingerprint straight.out)"
echo "DistHosts: host 3's link cut at step ~$last: the job ended in $took s (exit $code: $(grep -m1 -o 'lost communication with a remote daemon\|without an answer from the other ranks' cut.err)); resumed on 2 hosts from step $last to $to: the straight run's fingerprint"

# 50 ms of delay and 1% loss between hosts 1 and 2: tc netem on host 2's link where the kernel has
# it, else a link of their own carried in user space (lossy_link.py: two TUN devices, the packets
# held back and dropped by a seeded draw), the ranks' traffic on it alone
lossy() {
  local start=$SECONDS
  ranks lossy "$(hosts 1:1 2:1)" 2 --out lossy --steps 9 "$@" || fail "with delay and loss: $(tail -5 lossy.err)"
  [ "$(fingerprint lossy.out)" = "$want" ] || fail "with delay and loss: $(fingerprint lossy.out), one process: $want"
  lossy_seconds=$((SECONDS - start))
}
if netem=$(tc qdisc add dev "${tag}v2" root netem delay 50ms loss 1% 2>&1); then
  lossy
  echo "DistHosts: 50 ms delay and 1% loss on host 2's link (tc netem): the same fingerprint ($lossy_seconds s)"
  tc qdisc del dev "${tag}v2" root
else
  lnet=10.$((200 + $$ % 50)).$((($$ + 1) % 250))
  python3 "$here/lossy_link.py" "${tag}t1" "${tag}t2" --delay-ms 50 --loss 0.01 --seed 7 >link.log 2>&1 &
  link=$!
  for _ in $(seq 100); do grep -q ready link.log && break; sleep 0.05; done
  grep -q ready link.log || fail "the user-space link did not start: $(cat link.log)"
  for h in 1 2; do
    ip link set "${tag}t$h" netns "${tag}h$h"
    ip netns exec "${tag}h$h" ip addr add "$lnet.$h" peer "$lnet.$((3 - h))" dev "${tag}t$h"
    ip netns exec "${tag}h$h" ip link set "${tag}t$h" up
  done
  # the ranks' traffic on the lossy link only (mpirun's own stays on the bridge)
  saved=("${mpi[@]}")
  for i in "${!mpi[@]}"; do [ "${mpi[$i]}" = "$net.0/24" ] && [ "${mpi[$((i - 1))]}" = btl_tcp_if_include ] && mpi[$i]="$lnet.0/24"; done
  lossy
  mpi=("${saved[@]}")
  kill -TERM $link
  wait $link
  carried=$(sed -n 's/.*carried \([0-9]*\) packets, dropped \([0-9]*\)/\1 \2/p' link.log)
  [ -n "$carried" ] && [ "${carried% *}" -gt 0 ] && [ "${carried#* }" -gt 0 ] || fail "the lossy link carried or dropped nothing: $(cat link.log)"
  echo "DistHosts: 50 ms delay and 1% loss between hosts 1 and 2 (no tc netem in this kernel: a user-space link, ${carried% *} packets carried, ${carried#* } dropped): the same fingerprint ($lossy_seconds s)"
fi
