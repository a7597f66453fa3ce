"""From the finding to the fix: small PyTorch scripts with one planted cause of nondeterminism
each (tests/python/torch_planted/), recorded twice by bitgrad.torch; `bitgrad diff` must name
the first differing step, the first op that differs and the cause with its fix, and `bitgrad
audit --torch` the setting that moves the bits. Two runs of a deterministic script are
identical."""
import json
import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

BITGRAD_BIN = os.environ.get("BITGRAD_BIN", "bitgrad")
PLANTED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "torch_planted")


def _env(**extra):
    env = dict(os.environ)
    env.pop("PYTHONHASHSEED", None)  # each run draws its own unless a test sets it
    env.update(extra)
    return env


def _record(d, name, script, *options, env=None):
    r = subprocess.run([sys.executable, "-m", "bitgrad.torch.record", "--out", str(d / name), *options, "--",
                        os.path.join(PLANTED, script)], cwd=str(d), capture_output=True, text=True, timeout=300,
                       env=env or _env())
    assert r.returncode == 0, r.stderr
    return d / name


def _diff(a, b):
    r = subprocess.run([BITGRAD_BIN, "diff", str(a), str(b)], capture_output=True, text=True, timeout=300, env=_env())
    assert r.returncode in (0, 1), r.stdout + r.stderr
    return r


def _line(out, prefix):
    lines = [l for l in out.splitlines() if l.startswith(prefix)]
    assert lines, "no line starting with %r in:\n%s" % (prefix, out)
    return lines[0]


def _two_hash_seeds_that_order(names):
    """Two PYTHONHASHSEED values under which the set iterates in different orders."""
    code = "print(list({%s}))" % ", ".join(repr(n) for n in names)  # the script's set literal
    seen = {}
    for seed in range(1, 40):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             env=_env(PYTHONHASHSEED=str(seed))).stdout
        for other, order in seen.items():
            if order != out:
                return str(other), str(seed)
        seen[seed] = out
    pytest.fail("no two hash seeds order %s differently" % (names,))


def test_two_runs_of_a_deterministic_script_are_identical(tmp_path):
    a = _record(tmp_path, "a", "deterministic.py")
    b = _record(tmp_path, "b", "deterministic.py")
    r = _diff(a, b)
    assert r.returncode == 0, r.stdout
    assert "identical: 4 steps, every input, loss, gradient and parameter the same" in r.stdout, r.stdout


def test_the_thread_count(tmp_path):
    a = _record(tmp_path, "t1", "threads.py", "--threads", "1")
    b = _record(tmp_path, "t2", "threads.py", "--threads", "2")
    r = _diff(a, b)
    out = r.stdout
    assert r.returncode == 1
    assert "first difference: step 1, the gradient of 0.weight" in out, out
    assert _line(out, "first op:").startswith("first op: backward 'aten.convolution_backward'"), out
    assert "called at threads.py:16" in out and "its inputs were the same: this op computed them differently" in out, out
    assert _line(out, "cause:").startswith("cause: the thread count (1 vs 2)"), out
    assert "it cannot be removed inside PyTorch" in out and "bitgrad.onnx" in out, out


def test_loader_workers_with_an_unseeded_numpy_augmentation(tmp_path):
    a = _record(tmp_path, "w0", "workers_numpy.py", "--workers", "0")
    b = _record(tmp_path, "w2", "workers_numpy.py", "--workers", "2")
    out = _diff(a, b).stdout
    assert "first difference: step 1, the input batch" in out, out
    assert "first op: forward 'aten.addmm', label 0:Linear, called at workers_numpy.py:30" in out, out
    assert _line(out, "cause:").startswith("cause: the same samples with other contents under num_workers 0 vs 2"), out
    assert "numpy.random.default_rng([seed, epoch, index])" in _line(out, "fix:"), out
    # the workers were there: PyTorch seeds each worker's NumPy from the loader's seed, so two runs
    # with workers agree where two without do not (below)
    assert _diff(b, _record(tmp_path, "w2b", "workers_numpy.py", "--workers", "2")).returncode == 0
    with open(b / "manifest.json") as f:
        run = json.load(f)["run"]
    assert run["set_from_outside"] == {"threads": 1, "num_workers": 2} or run["set_from_outside"] == {"num_workers": 2}
    assert [(o["setting"], o["script"], o["used"], o["explicit"]) for o in run["overridden"]] == [
        ("torch.utils.data.DataLoader(num_workers=...)", 0, 2, False)], run["overridden"]
    # without workers, NumPy's unseeded generator alone: two runs differ, and the fix seeds it
    c = _record(tmp_path, "w0b", "workers_numpy.py", "--workers", "0")
    out = _diff(a, c).stdout
    assert _line(out, "cause:") == "cause: the batch's contents differ and so does the state of numpy's generator: numpy.random.seed is never called", out
    assert _line(out, "fix:").startswith("fix: numpy.random.seed(0)"), out


def test_dropout_without_a_seed(tmp_path):
    a = _record(tmp_path, "a", "dropout_unseeded.py")
    b = _record(tmp_path, "b", "dropout_unseeded.py")
    out = _diff(a, b).stdout
    assert "first difference: step 1, the loss" in out, out
    assert ("first op: forward 'aten.bernoulli_.float', label 2:Dropout, called at dropout_unseeded.py:20" in out
            and "a random op, whose generator's state differed" in out), out
    cause = _line(out, "cause:")
    assert "the random op aten.bernoulli_.float at dropout_unseeded.py:20" in cause and "the script does not seed it" in cause, out
    assert _line(out, "fix:").startswith("fix: torch.manual_seed(0)"), out
    with open(a / "manifest.json") as f:  # the epoch timer is seen, and not blamed
        assert [r["site"] for r in json.load(f)["run"]["clock_reads"]] == ["dropout_unseeded.py:17", "dropout_unseeded.py:24"]


def test_a_set_iterated_under_another_hash_seed(tmp_path):
    s1, s2 = _two_hash_seeds_that_order(["cat", "dog", "bird", "fish", "frog", "horse"])
    a = _record(tmp_path, "a", "set_order.py", env=_env(PYTHONHASHSEED=s1))
    b = _record(tmp_path, "b", "set_order.py", env=_env(PYTHONHASHSEED=s2))
    out = _diff(a, b).stdout
    assert 'environment.PYTHONHASHSEED: "%s" | "%s"' % (s1, s2) in out, out
    assert "first difference: step 1, the input batch" in out, out
    assert "before the step, the first op whose output differs: 'aten.randn.generator' called at set_order.py:13" in out, out
    assert _line(out, "cause:") == ("cause: the same sample indices with other contents; the runs hash strings differently "
                                    "(PYTHONHASHSEED %s vs %s): a dataset built in a set's order" % (s1, s2)), out
    assert "sorted(...)" in _line(out, "fix:"), out


def test_a_shuffle_seeded_from_the_wall_clock(tmp_path):
    a = _record(tmp_path, "a", "clock_shuffle.py")
    b = _record(tmp_path, "b", "clock_shuffle.py")
    out = _diff(a, b).stdout
    assert "first difference: step 1, the input batch" in out, out
    assert _line(out, "cause:") == ("cause: the data order follows the wall clock: the script reads it at clock_shuffle.py:12 "
                                    "(time.time_ns) and the sampler's indices differ"), out
    with open(a / "manifest.json") as f:
        reads = json.load(f)["run"]["clock_reads"]
    assert reads == [{"call": "time.time_ns", "site": "clock_shuffle.py:12", "reads": 1, "step": 0}], reads


def test_a_sum_over_a_dicts_order(tmp_path):
    s1, s2 = _two_hash_seeds_that_order(["alpha", "beta", "gamma", "delta", "epsilon", "zeta"])
    a = _record(tmp_path, "a", "dict_sum.py", env=_env(PYTHONHASHSEED=s1))
    b = _record(tmp_path, "b", "dict_sum.py", env=_env(PYTHONHASHSEED=s2))
    out = _diff(a, b).stdout
    assert "first difference: step 1, the " in out, out
    assert "called at dict_sum.py:18" in _line(out, "first op:") and "the same values in another order" in out, out
    cause = _line(out, "cause:")
    assert "took the same values in another order" in cause and "PYTHONHASHSEED %s vs %s" % (s1, s2) in cause, out


def _audit(tmp_path, script, *options):
    return subprocess.run([BITGRAD_BIN, "audit", "--torch", "%s %s" % (sys.executable, os.path.join(PLANTED, script)),
                           "--out", str(tmp_path / "audit"), *options], capture_output=True, text=True, timeout=600,
                          cwd=str(tmp_path), env=_env())


def test_audit_names_the_thread_count(tmp_path):
    r = _audit(tmp_path, "threads.py", "--threads", "1,2", "--runs", "2")
    assert r.returncode == 1, r.stdout + r.stderr
    out = r.stdout
    assert "repeated runs at one setting agree" in out, out
    assert "--threads moves the bits: runs 1 and 2 (threads 1, workers 0 vs threads 2, workers 0) differ\n" in out, out
    assert "runs with the same bits: 1, 3; 2, 4" in out, out
    assert "  cause: the thread count (1 vs 2)" in out or "  cause: the thread count (2 vs 1)" in out, out
    with open(tmp_path / "audit" / "audit.json") as f:
        j = json.load(f)
    assert j["moves_the_bits"] == {"repeated at one setting": False, "--threads": True}
    assert j["bitwise_equal"]["parameters"][0] == [True, False, True, False]
    assert j["matrices"]["gradients"][0][1] > 0 and j["matrices"]["gradients"][0][2] == 0
    assert [x["threads"] for x in j["runs"]] == [1, 2, 1, 2]
    # bitgrad report draws the audit (its matrices, verdicts and finding) and the runs (their loss
    # curves from the traces)
    audit = tmp_path / "audit"
    r = subprocess.run([BITGRAD_BIN, "report", str(audit), str(audit / "run-1"), str(audit / "run-2"), "-o",
                        str(tmp_path / "report.html")], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "report of 3 runs with" in r.stdout, r.stdout + r.stderr
    html = (tmp_path / "report.html").read_text()
    assert "<h3>run 2 against run 1</h3>" in html and "moves the bits</strong>" in html and "threads.py</li>" in html
    assert "runs of a PyTorch script (t threads, w loader workers)" in html


def test_audit_names_the_loader_workers(tmp_path):
    r = _audit(tmp_path, "workers_numpy.py", "--workers", "0,2", "--runs", "2")
    assert r.returncode == 1, r.stdout + r.stderr
    out = r.stdout
    assert "--workers moves the bits: runs 1 and 2 (threads 1, workers 0 vs threads 1, workers 2) differ" in out, out
    # and without workers, NumPy's unseeded generator: runs at one setting differ too
    assert "the script is not deterministic on its own: runs 1 and 3 (threads 1, workers 0) differ" in out, out
    assert "runs with the same bits: 1; 2, 4; 3" in out, out  # with workers, the runs repeat
    assert "cause: the same samples with other contents under num_workers" in out, out


def test_audit_of_a_deterministic_script_and_a_setting_it_fixes_itself(tmp_path):
    script = tmp_path / "fixed.py"
    with open(os.path.join(PLANTED, "deterministic.py")) as f:
        script.write_text("import torch\ntorch.set_num_threads(2)\n" + f.read())
    r = _audit(tmp_path, str(script))  # an absolute path: not one of the planted scripts
    assert r.returncode == 0, r.stdout + r.stderr
    assert ("note: the script sets torch.set_num_threads to [2] at fixed.py:2; the audit kept 1 (the setting under test)"
            in r.stdout), r.stdout
    assert "repeated runs at one setting agree" in r.stdout and "all bitwise equal: 2 runs" in r.stdout, r.stdout


def test_audit_refuses_what_it_cannot_run(tmp_path):
    def audit(command, *options):
        return subprocess.run([BITGRAD_BIN, "audit", "--torch", command, *options], capture_output=True, text=True,
                              timeout=60, cwd=str(tmp_path))

    r = audit("bash train.sh")
    assert r.returncode == 2 and "the command must start with a Python interpreter, got 'bash'" in r.stderr, r.stderr
    r = audit("python3 -m train")
    assert r.returncode == 2 and "'-m': the audit runs a script file" in r.stderr, r.stderr
    r = audit("python3 missing.py")
    assert r.returncode == 2 and "the script 'missing.py' does not exist" in r.stderr, r.stderr
    r = audit("python3 'train.py")
    assert r.returncode == 2 and "unterminated '" in r.stderr, r.stderr
    r = audit("python3 train.py $HOME")
    assert r.returncode == 2 and "would be interpreted by a shell" in r.stderr, r.stderr
    (tmp_path / "t.py").write_text("")
    r = audit("python3 t.py", "--accumulate", "2")
    assert r.returncode == 2 and "--accumulate, --ranks and --steps are for bitgrad's own configurations" in r.stderr, r.stderr
    r = audit("%s t.py" % sys.executable, "--threads", "1")
    assert r.returncode == 2 and "recorded no step (no last.safetensors)" in r.stderr, r.stderr
