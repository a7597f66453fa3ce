"""`bitgrad diff` of two PyTorch runs down to the op: each script runs again up to the first
differing step (python3 -m bitgrad.torch.replay) with that step's ops traced, and diff names the
first op whose output differs, its module and the script's line, whether its inputs differed
already, and the size of the difference in ULPs."""
import json
import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

BITGRAD_BIN = os.environ.get("BITGRAD_BIN", "bitgrad")

# An MLP with dropout; argv[1] = K reseeds torch before step K's forward (another dropout mask,
# the same batch), argv[2] = K shifts step K's batch by 1e-6 (an extra op in its forward).
SCRIPT = """
import sys
import torch
import torch.nn.functional as F

torch.manual_seed(0)
X = torch.randn(96, 12)
Y = torch.randint(0, 3, (96,))
model = torch.nn.Sequential(torch.nn.Linear(12, 16), torch.nn.ReLU(), torch.nn.Dropout(0.3), torch.nn.Linear(16, 3))
opt = torch.optim.SGD(model.parameters(), lr=1e-2, momentum=0.9)
import os
reseed, shift = int(sys.argv[1]), int(sys.argv[2])
os.environ.get("MY_API_TOKEN")  # a credential read: named in the manifest, its value not
for step in range(1, 7):
    x, y = X[(step - 1) * 16: step * 16], Y[(step - 1) * 16: step * 16]
    if step == reseed:
        torch.manual_seed(1234)
    if step == shift:
        x = x + 1e-6
    loss = F.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


def _record(d, name, *args):
    r = subprocess.run([sys.executable, "-m", "bitgrad.torch.record", "--out", str(d / name), "--", str(d / "train.py"),
                        *args], cwd=str(d), capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return d / name


def _diff(a, b, *options):
    return subprocess.run([BITGRAD_BIN, "diff", str(a), str(b), *options], capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    d = tmp_path_factory.mktemp("torch_replay")
    (d / "train.py").write_text(SCRIPT)
    return {"dir": d, "a": _record(d, "a", "0", "0"), "reseeded": _record(d, "reseeded", "4", "0"),
            "shifted": _record(d, "shifted", "0", "3")}


def test_a_random_op_is_named_with_its_module_line_and_ulps(runs):
    r = _diff(runs["a"], runs["reseeded"])
    assert r.returncode == 1, r.stdout + r.stderr
    out = r.stdout
    assert "first difference: step 4, the loss" in out, out
    # the dropout's mask: the first op whose output differs, its inputs the same
    assert ("first op: forward 'aten.bernoulli_.float', label 2:Dropout, called at train.py:20" in out
            and "its inputs were the same: a random op, whose generator's state differed" in out), out
    assert "replayed: 1 of 1 elements differ" in out and " ulp " in out, out
    assert "warning" not in out, out  # each replay gave the step it recorded
    replay = runs["a"] / "replay-step-4"
    with open(replay / "replay.json") as f:
        info = json.load(f)
    assert info["ended"] == {"status": "replayed", "step": 4} and info["ops"] > 20
    with open(replay / "ops.jsonl") as f:
        ops = [json.loads(line) for line in f]
    assert {o["step"] for o in ops} == {4}
    assert {"forward", "backward", "optimizer"} <= {o["phase"] for o in ops}
    assert [o["seq"] for o in ops] == list(range(1, len(ops) + 1))
    # the loss the replay kept is the run's own, bit for bit
    import bitgrad

    tensors, _ = bitgrad.io.load_safetensors(str(replay / "tensors.safetensors"))
    with open(runs["a"] / "trace.jsonl") as f:
        traced = [json.loads(line) for line in f][3]
    bits = int(tensors["loss"].numpy().astype("float32").view("uint32"))
    assert "0x%08x" % bits == traced["loss"]
    assert {"grad 0.weight", "param 3.bias"} <= set(tensors)


def test_ops_that_part_are_named_with_both_sites(runs):
    r = _diff(runs["a"], runs["shifted"])
    assert r.returncode == 1, r.stdout + r.stderr
    assert "first difference: step 3, the input batch" in r.stdout, r.stdout
    assert ("the op sequences part at op 3 of the step: forward 'aten.t' [12, 16] (0:Linear, called at train.py:20) "
            "vs 'aten.add.Tensor' [16, 12] (called at train.py:19)") in r.stdout, r.stdout


def test_an_unseeded_generator_nobody_draws_from_is_no_difference(runs):
    # the script never seeds NumPy's global generator nor draws from it: each process starts it
    # elsewhere, and the manifests say so, but no number can follow it
    b = _record(runs["dir"], "b", "0", "0")
    r = _diff(runs["a"], b)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "run.rng_at_start.numpy:" in r.stdout, r.stdout
    assert "identical: 6 steps, every input, loss, gradient and parameter the same" in r.stdout, r.stdout
    assert not [p for p in os.listdir(b) if p.startswith("replay")]


def test_a_replay_names_what_it_cannot_run(runs, tmp_path):
    def replay(*args):
        return subprocess.run([sys.executable, "-m", "bitgrad.torch.replay", *args], capture_output=True, text=True, timeout=120)

    r = replay(str(runs["a"]), "--step", "0", "--out", str(tmp_path / "x"))
    assert r.returncode == 2 and "--step: expected a step number from 1" in r.stderr, r.stderr
    r = replay(str(tmp_path), "--step", "1", "--out", str(tmp_path / "x"))
    assert r.returncode == 2 and "holds no run (no manifest.json)" in r.stderr, r.stderr
    moved = tmp_path / "moved"
    moved.mkdir()
    m = json.loads((runs["a"] / "manifest.json").read_text())
    m["run"]["script"]["path"] = str(tmp_path / "gone.py")
    (moved / "manifest.json").write_text(json.dumps(m))
    r = replay(str(moved), "--step", "1", "--out", str(tmp_path / "x"))
    assert r.returncode == 2 and "gone.py" in r.stderr and "not there to run again" in r.stderr, r.stderr
    # diff says which replay failed and why
    (moved / "trace.jsonl").write_text((runs["reseeded"] / "trace.jsonl").read_text())
    r = _diff(runs["a"], moved)
    assert r.returncode == 2 and "replaying step 4 of" in r.stderr and "not there to run again" in r.stderr, r.stderr


def test_records_with_other_parameter_lists_are_named_not_misread(runs, tmp_path):
    # a step whose records list other numbers of gradients: named, in either order
    lines = (runs["a"] / "trace.jsonl").read_text().splitlines()
    rec = json.loads(lines[1])
    rec["grad"] = rec["grad"][:-1]
    lines[1] = json.dumps(rec)
    cut = tmp_path / "cut"
    cut.mkdir()
    (cut / "manifest.json").write_text((runs["a"] / "manifest.json").read_text())
    (cut / "trace.jsonl").write_text("\n".join(lines) + "\n")
    for a, b, counts in ((runs["a"], cut, "(4 vs 3)"), (cut, runs["a"], "(3 vs 4)")):
        r = _diff(a, b)
        assert r.returncode == 1, r.stdout + r.stderr
        assert "first difference: step 2, the number of gradients " + counts in r.stdout, r.stdout


def test_the_environment_read_is_recorded_but_not_credentials(runs):
    m = json.loads((runs["a"] / "manifest.json").read_text())
    assert m["run"]["environment_read"]["MY_API_TOKEN"] in (None, "<redacted>")
    d = runs["dir"]
    r = subprocess.run([sys.executable, "-m", "bitgrad.torch.record", "--out", str(d / "secret"), "--", str(d / "train.py"), "0", "0"],
                       cwd=str(d), capture_output=True, text=True, timeout=300, env=dict(os.environ, MY_API_TOKEN="s3cr3t"))
    assert r.returncode == 0, r.stderr
    text = (d / "secret" / "manifest.json").read_text()
    assert "s3cr3t" not in text and json.loads(text)["run"]["environment_read"]["MY_API_TOKEN"] == "<redacted>"
