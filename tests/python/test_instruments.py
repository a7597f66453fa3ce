"""The instruments from Python return data: diff, audit, sensitivity, report and sample, on small
runs of real configurations."""
import os

import pytest

import bitgrad as bg

MLP = {
    "seed": 7,
    "data": {"dataset": "fashion-mnist"},
    "model": {"layers": [{"type": "flatten"}, {"type": "linear", "out": 32}, {"type": "relu"}, {"type": "linear", "out": 10}]},
    "train": {"batch_size": 64, "steps": 4},
    "optimizer": {"type": "sgd", "lr": 0.05, "momentum": 0.9},
    "eval": {"batch_size": 1000},
}

GPT = {
    "seed": 3,
    "data": {"dataset": "text", "path": "/usr/share/games/fortunes", "val_fraction": 0.1},
    "model": {"type": "gpt", "n_layer": 1, "n_head": 2, "n_embd": 16, "block_size": 16, "bias": False},
    "train": {"batch_size": 4, "steps": 3},
    "optimizer": {"type": "adamw", "lr": 1e-3},
    "eval": {"windows": 4, "batch_size": 4},
}


def test_diff_names_the_first_difference(tmp_path):
    a = bg.train(MLP, out=str(tmp_path / "a"), threads=1, quiet=True)
    b = bg.train(MLP, out=str(tmp_path / "b"), threads=2, workers=2, quiet=True)
    c = bg.train(dict(MLP, seed=8), out=str(tmp_path / "c"), quiet=True)
    assert a["fingerprint"] == b["fingerprint"] != c["fingerprint"]
    same = bg.instruments.diff(a["out_dir"], b["out_dir"], quiet=True)
    assert same["identical"]
    other = bg.instruments.diff(a["out_dir"], c["out_dir"], quiet=True)
    assert not other["identical"] and "seed" in other["text"]
    metrics = bg.instruments.read_metrics(a["out_dir"])
    steps = [m for m in metrics if "loss" in m and "step" in m]
    assert [m["step"] for m in steps][:4] == [1, 2, 3, 4]
    assert bg.instruments.machine_manifest()["bitgrad"]["numerics"] == bg.numerics_version


def test_audit_returns_its_matrices(tmp_path):
    r = bg.instruments.audit(MLP, threads=[1, 3], workers=[0, 2], steps=3, out=str(tmp_path / "audit"), quiet=True)
    assert r["identical"] and os.path.exists(os.path.join(r["out_dir"], "audit.json"))
    assert len(r["runs"]) == 4


def test_sensitivity_and_report(tmp_path):
    s = bg.instruments.sensitivity(MLP, members=2, steps=3, out=str(tmp_path / "sens"), quiet=True)
    assert s["members"] == 2 and [r["step"] for r in s["per_step"]] == [1, 2, 3]
    # perturbed reduction orders move the parameters, a little
    assert all(0 < r["distance_mean"] < 1e-4 for r in s["per_step"])
    run = bg.train(MLP, out=str(tmp_path / "run"), quiet=True)
    page = str(tmp_path / "report.html")
    rep = bg.instruments.report([run["out_dir"], s["out_dir"]], page)
    assert rep["runs"] == 2 and rep["plots"] >= 2 and open(page).read().startswith("<!DOCTYPE html>")


def test_sample_is_a_function_of_its_arguments(tmp_path):
    if not os.path.isdir("/usr/share/games/fortunes"):
        pytest.fail("Debian's fortunes package is missing (scripts/install-deps.sh installs it)")
    run = bg.train(GPT, out=str(tmp_path / "gpt"), quiet=True)
    one = bg.instruments.sample(run["out_dir"], prompt="A", tokens=20, seed=5, threads=1)
    two = bg.instruments.sample(run["out_dir"], prompt="A", tokens=20, seed=5, threads=3)
    assert one == two and one["text"].startswith("A") and len(one["tokens"]) == 20 and one["step"] == 3
    assert bg.instruments.sample(run["out_dir"], prompt="A", tokens=20, seed=6)["tokens"] != one["tokens"]


def test_sample_logprobs_are_the_python_forwards_bits(tmp_path):
    """bitgrad.sample's log-probabilities (what `bitgrad serve` answers for "logprobs": k) are,
    bit for bit, log_softmax(model(x)) of the run's model in Python, for positions inside the first
    window and past it, at 1 and 2 threads."""
    import json
    import numpy as np

    if not os.path.isdir("/usr/share/games/fortunes"):
        pytest.fail("Debian's fortunes package is missing (scripts/install-deps.sh installs it)")
    run = bg.train(GPT, out=str(tmp_path / "gpt"), quiet=True)
    d = run["out_dir"]
    got = bg.instruments.sample(d, prompt="A", tokens=24, temperature=0.8, seed=5, logprobs=3, threads=1)
    assert bg.instruments.sample(d, prompt="A", tokens=24, temperature=0.8, seed=5, logprobs=3, threads=2) == got
    lp = got["logprobs"]
    assert len(lp["token_logprobs"]) == len(lp["tokens"]) == len(lp["top_logprobs"]) == 24
    # the model in Python, with the checkpoint's weights
    latest = open(os.path.join(d, "checkpoints", "latest")).read().strip()
    weights, _ = bg.io.load_safetensors(os.path.join(d, "checkpoints", latest, "model.safetensors"))
    model = bg.Session(GPT).model
    named = dict(model.named_parameters())  # the checkpoint's names (docs/python.md, "State")
    assert sorted(named) == sorted(weights)
    with bg.no_grad():
        for name, p in named.items():
            p.copy_(weights[name])
    model.eval()
    symbols = json.load(open(os.path.join(d, "vocabulary.json")))["symbols"]
    text = [symbols.index(ord("A"))] + list(got["tokens"])
    block = GPT["model"]["block_size"]
    with bg.no_grad():
        for i, t in enumerate(got["tokens"]):
            n = 1 + i  # tokens before the one drawn; past 16 the window slides
            window = np.asarray([text[max(0, n - block):n]], dtype=np.float32)
            row = bg.log_softmax(model(bg.tensor(window)), -1).numpy()[0, -1]
            want = row[t]
            assert np.float32(lp["token_logprobs"][i]).view(np.uint32) == np.float32(want).view(np.uint32), i
            assert lp["tokens"][i] == chr(symbols[t])
            top = lp["top_logprobs"][i]
            assert len(top) == 3 and max(top.values()) == row.max()  # the 3 most likely; the keys in JSON's sorted order
            assert min(top.values()) >= np.sort(row)[-3]
            for s, v in top.items():
                assert np.float32(v).view(np.uint32) == row[symbols.index(ord(s))].view(np.uint32), (i, s)
