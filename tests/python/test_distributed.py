"""Data parallel from Python (contract T6; numerics.md §20): `mpirun -n P python3
examples/python/data_parallel.py` gives a Python-defined MLP and CNN the fingerprint of one process
for P = 1, 2, 3, 4, at threads 1, 2, 3 and loader workers 0, 2 (accumulate varied too); a run
checkpointed on 4 ranks continues on 2 and then 1 to the bits of an uninterrupted run (elastic
resume); an MPI started by another library is used as it is; the replica check
stops every rank when one was initialised differently; one rank's error ends the job. Without
mpirun the module imports and trains without starting MPI, and the step's plan is the CLI's.

Every mpirun is bounded in time (and BITGRAD_DIST_TIMEOUT bounds a wait between ranks). The MLP is
a C++ Sequential, the CNN a Python nn.Module subclass (the example's class CNN)."""
import os
import shutil
import subprocess
import sys

import pytest

import bitgrad as bg
from bitgrad import distributed as dist
from bitgrad import nn

from conftest import SOURCE_DIR

EXAMPLE = str(SOURCE_DIR / "examples" / "python" / "data_parallel.py")
MPIRUN = os.environ.get("BITGRAD_MPIRUN") or shutil.which("mpirun")
needs_mpi = pytest.mark.skipif(not (MPIRUN and dist.have_mpi()), reason="no mpirun, or bitgrad built without MPI")


def run(args, P=None, limit=180):
    """The example (or a script) on P ranks under mpirun, or in one process without it."""
    env = dict(os.environ, BITGRAD_DIST_TIMEOUT="60")
    cmd = [sys.executable] + args
    if P is not None:
        cmd = [MPIRUN, "--oversubscribe", "--allow-run-as-root", "--bind-to", "none", "-n", str(P)] + cmd
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=limit, env=env)
    return r.returncode, r.stdout, r.stderr


def fingerprint(out):
    lines = [line for line in out.splitlines() if line.startswith("fingerprint ")]
    assert len(lines) == 1, out  # rank 0 alone prints
    return lines[0].split()[1]


def test_imports_and_trains_without_mpi():
    assert not dist.launched_by_mpirun()
    assert dist.init() == 1 and dist.world_size() == 1 and dist.rank() == 0 and dist.is_root()
    assert not dist.initialized()  # one process: MPI is never started
    assert dist.allgather_bytes(b"abc") == [b"abc"] and dist.broadcast_bytes(b"xy") == b"xy"


def test_the_plan_is_the_training_steps():
    # 8 blocks of 32 over 3 ranks: shards of 2, 3 and 3 blocks, the tree's nodes
    p = [dist.plan_step(256, 256, 1, 3, r) for r in range(3)]
    assert [q.shard for q in p] == [(0, 64), (64, 160), (160, 256)]
    assert p[1].rank_nodes == [[(0, 2)], [(2, 4), (4, 5)], [(5, 6), (6, 8)]]
    assert p[1].pieces == [[(64, 128)], [(128, 160)]] and p[0].whole_batch
    # micro-batches of 48: not whole blocks, so the leaves are the micro-batches themselves
    q = dist.plan_step(192, 192, 4, 2, 1)
    assert q.leaf_rows == 48 and q.shard == (96, 192) and not q.whole_batch
    assert "fewer than the 5 ranks" in dist.plan_problem(128, 1, 5)
    with pytest.raises(bg.InputError, match="does not split into 3 equal micro-batches"):
        dist.DataParallel(nn.Linear(2, 2), 128, accumulate=3)


def test_one_process_step_is_the_plain_loop():
    # DataParallel in one process, given the whole batch: the bits of loss.backward() on it
    model = nn.Sequential(nn.Linear(12, 16), nn.Tanh(), nn.Linear(16, 5), seed=2)
    ds = bg.data.synthetic(128, [12], classes=5, seed=3)
    b = bg.data.DataLoader(ds, 128, shuffle=False).next()
    loss = bg.cross_entropy(model(b.x), b.y)
    loss.backward()
    want = [bg.fingerprint(p.grad) for p in model.parameters()]
    model.zero_grad()
    dp = dist.DataParallel(model, 128, accumulate=2)
    got = dp.step((b.x, b.y), lambda x, y, row: bg.cross_entropy(model(x), y, reduction="sum"))
    assert got.item() == loss.item() and [bg.fingerprint(p.grad) for p in model.parameters()] == want
    with pytest.raises(bg.InputError, match="already holds a gradient"):
        dp.step((b.x, b.y), lambda x, y, row: bg.cross_entropy(model(x), y, reduction="sum"))


@needs_mpi
@pytest.mark.parametrize("model", ["mlp", "cnn"])
def test_any_number_of_ranks_gives_the_fingerprint_of_one_process(model):
    base = [EXAMPLE, "--model", model, "--total-steps", "8"]
    code, out, err = run(base + ["--threads", "2"])
    assert code == 0, out + err
    want = fingerprint(out)
    cases = [(None, ["--threads", "3", "--workers", "2"]), (1, ["--threads", "1"]), (2, ["--threads", "1", "--workers", "2"]),
             (3, ["--threads", "1", "--accumulate", "2"]), (4, ["--threads", "1"])]
    for P, flags in cases:  # None: one process without mpirun
        code, out, err = run(base + flags, P)
        assert code == 0, (P, flags, out + err)
        assert fingerprint(out) == want, (P, flags)
        if P:
            assert "%d rank(s)" % P in out


@needs_mpi
def test_elastic_resume_on_another_number_of_ranks(tmp_path):
    base = [EXAMPLE, "--model", "cnn", "--total-steps", "11", "--threads", "1"]
    code, out, err = run(base)
    assert code == 0, out + err
    want = fingerprint(out)
    ck5, ck9 = str(tmp_path / "ck5.safetensors"), str(tmp_path / "ck9.safetensors")
    code, out, err = run(base + ["--steps", "5", "--save", ck5], 4)
    assert code == 0 and os.path.exists(ck5), out + err
    code, out, err = run(base + ["--steps", "9", "--resume", ck5, "--save", ck9], 2)
    assert code == 0 and "resumed at step 5" in out, out + err
    code, out, err = run(base + ["--resume", ck9])
    assert code == 0, out + err
    assert fingerprint(out) == want


REPLICA = """
import sys
import bitgrad as bg
from bitgrad import distributed as dist, nn
dist.init()
mode = sys.argv[1]
# rank 1 builds its model from another seed: the replica check refuses, on every rank
model = nn.Sequential(nn.Linear(4, 3), seed=1 if mode == "replica" and dist.rank() == 1 else 0)
if mode == "error" and dist.rank() == 1:
    raise RuntimeError("only rank 1 fails")
dp = dist.DataParallel(model, 64)
print("not reached", dist.rank())
"""


@needs_mpi
def test_the_replica_check_and_a_failing_rank_stop_every_rank(tmp_path):
    script = tmp_path / "replica.py"
    script.write_text(REPLICA)
    code, out, err = run([str(script), "replica"], 2, limit=120)
    assert code != 0 and "not reached" not in out, out + err
    assert "replica check after step 0: rank 1" in err and "differs from rank 0" in err and "parameter '0.weight'" in err, err
    assert err.count("bitgrad.distributed.ReplicaError: ") == 1, err  # printed once, by rank 0
    # a world larger than the batch's blocks: refused alike on every rank, printed once
    code, out, err = run([str(script), "too-many"], 3, limit=120)
    assert code != 0 and "not reached" not in out, out + err
    assert err.count("bitgrad.distributed.RefusedError: DataParallel: cannot train on 3 ranks: a batch of 64 samples has 2 "
                     "blocks of 32 samples, fewer than the 3 ranks") == 1, err
    # an error of one rank alone ends the job at once (the other would wait in DataParallel's check)
    code, out, err = run([str(script), "error"], 2, limit=120)
    assert code != 0 and "not reached" not in out, out + err
    assert "rank 1" in err and "only rank 1 fails" in err, err


EXTERNAL = """
import ctypes, ctypes.util, pathlib, sys
mpi = ctypes.CDLL(ctypes.util.find_library("mpi") or "libmpi.so.40", mode=ctypes.RTLD_GLOBAL)
assert mpi.MPI_Init(None, None) == 0          # another library (mpi4py) starts MPI first
from bitgrad import distributed as dist
lines = ["rank %d of %d %s" % (dist.rank(), dist.init(), dist.allgather_bytes(bytes([dist.rank()])) == [b"\\x00", b"\\x01"])]
dist.finalize()                               # left to its owner
done = ctypes.c_int(1)
mpi.MPI_Finalized(ctypes.byref(done))
lines.append("finalized by bitgrad: %s" % bool(done.value))
# a file per rank: mpirun forwards the ranks' stdout in pieces that interleave ("rank 0 of 2 Truerank 1...")
pathlib.Path(sys.argv[1], "rank%d.txt" % dist.rank()).write_text("\\n".join(lines) + "\\n")
mpi.MPI_Finalize()
"""


@needs_mpi
def test_an_mpi_started_by_another_library_is_used_as_it_is(tmp_path):
    script = tmp_path / "external.py"
    script.write_text(EXTERNAL)
    code, out, err = run([str(script), str(tmp_path)], 2, limit=120)
    assert code == 0, out + err
    got = [(tmp_path / ("rank%d.txt" % r)).read_text().splitlines() for r in range(2)]
    assert got == [["rank 0 of 2 True", "finalized by bitgrad: False"], ["rank 1 of 2 True", "finalized by bitgrad: False"]], (got, out, err)
