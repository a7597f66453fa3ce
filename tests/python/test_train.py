"""The promise from Python: a Session stepped by a Python loop has the CLI's fingerprint; a
custom loop (Sequential, SGD, the loader) gives the same bits at 1, 2 and 3 threads and with 0
and 2 workers, also when the samples come from a Python dataset whose timing varies."""
import os
import random
import re
import sys
import subprocess
import threading
import time

import numpy as np
import pytest

import bitgrad as bg

STEPS = 12


def cli_fingerprint(cli, config, steps, out, *extra):
    r = subprocess.run([cli, "train", str(config), "--steps", str(steps), "--out", str(out), *extra],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    m = re.search(r"^fingerprint ([0-9a-f]{32})$", r.stdout, re.M)
    assert m, r.stdout
    return m.group(1)


def test_a_session_stepped_from_python_has_the_clis_fingerprint(cli, source_dir, tmp_path):
    config = source_dir / "examples" / "fashion_mlp.toml"
    expected = cli_fingerprint(cli, config, STEPS, tmp_path / "cli")
    s = bg.Session(str(config), threads=2)
    records = [s.step() for _ in range(STEPS)]
    assert [r["step"] for r in records] == list(range(1, STEPS + 1))
    assert s.steps == STEPS and s.fingerprint() == expected
    # the CLI's metrics have the same losses, to the bit
    cli_losses = [r["loss"] for r in bg.instruments.read_metrics(str(tmp_path / "cli")) if "loss" in r and "step" in r]
    assert [np.float32(r["loss"]) for r in records] == [np.float32(x) for x in cli_losses[:STEPS]]
    # bitgrad.train is `bitgrad train`
    res = bg.train(str(config), steps=STEPS, out=str(tmp_path / "py"), threads=1, workers=2, quiet=True)
    assert res["fingerprint"] == expected and res["steps"] == STEPS
    d = bg.instruments.diff(str(tmp_path / "cli"), str(tmp_path / "py"), quiet=True)
    assert d["identical"], d["text"]


def test_a_config_as_a_dict_is_the_file(source_dir):
    text = (source_dir / "examples" / "adder.toml").read_text()
    from_file = bg.load_config(str(source_dir / "examples" / "adder.toml"))
    import tomllib

    as_dict = tomllib.loads(text)
    from_dict = bg._config.load(as_dict)
    assert from_dict.hash() == from_file.hash()
    a, b = bg.Session(from_file), bg.Session(as_dict)
    for _ in range(5):
        a.step(), b.step()
    assert a.fingerprint() == b.fingerprint()


def mlp(seed=3):
    return bg.nn.Sequential(bg.nn.Flatten(), bg.nn.Linear(784, 64), bg.nn.ReLU(), bg.nn.Dropout(0.1, 0),
                            bg.nn.Linear(64, 10), seed=seed)


def custom_loop(ds, threads, workers, steps=8):
    bg.set_num_threads(threads)
    model = mlp()
    opt = bg.optim.SGD(model, lr=0.05, momentum=0.9)
    loader = bg.data.DataLoader(ds, 64, seed=11, workers=workers, shuffle=True)
    losses = []
    for step in range(steps):
        batch = loader.next()
        ctx = bg.nn.Context(training=True, seed=11, step=step)
        loss = bg.cross_entropy(model(batch.x, ctx), batch.y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return bg.fingerprint(model.parameters() + [t for t in opt.state_dict().values() if isinstance(t, bg.Tensor)]), losses


def test_a_custom_loop_gives_the_same_bits_for_any_threads_and_workers():
    ds = bg.data.fashion_mnist(train=True)
    results = {(t, w): custom_loop(ds, t, w) for t in (1, 2, 3) for w in (0, 2)}
    first = results[(1, 0)]
    for k, r in results.items():
        assert r == first, k
    assert first[1][-1] < first[1][0]  # it learns


class JitteryImages:
    """A Python dataset whose samples take a random time (another thread's random, so the order
    in which the loader's threads finish differs from run to run); sample i depends on i alone."""

    num_classes = 10

    def __init__(self, n=640):
        self.n = n
        self.jitter = random.Random()  # deliberately unseeded: timing only
        self.calls = 0
        self.threads = set()

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        self.calls += 1
        self.threads.add(threading.get_ident())
        time.sleep(self.jitter.random() * 1e-4)
        rs = np.random.RandomState(i)
        return rs.standard_normal((1, 28, 28)).astype(np.float32), int(rs.randint(10))


def test_a_python_dataset_cannot_make_a_result_depend_on_timing():
    results = set()
    for threads, workers in ((1, 0), (3, 0), (2, 2), (1, 3)):
        ds = JitteryImages()
        results.add(custom_loop(ds, threads, workers, steps=6)[0])
        assert ds.calls >= 6 * 64
        if threads > 1 or workers > 1:
            assert len(ds.threads) > 1  # several threads asked for samples, in an order timing decides
    assert len(results) == 1


def test_the_loader_iterates_one_epoch_and_batches_are_pure_functions_of_their_position():
    ds = bg.data.synthetic(100, [3], classes=4, seed=5)
    loader = bg.data.DataLoader(ds, 32, seed=1, drop_last=False, workers=2)
    batches = list(loader)
    assert [b.index for b in batches] == [0, 1, 2, 3] and batches[-1].x.shape == (4, 3)
    assert loader.epoch == 1 and loader.index == 0
    again = bg.data.DataLoader(ds, 32, seed=1, drop_last=False)
    again.seek(0, 2)
    b2 = again.next()
    assert bg.fingerprint([b2.x, b2.y]) == bg.fingerprint([batches[2].x, batches[2].y])
    x, y = batches[0]
    assert x.shape == (32, 3) and y.dtype == bg.int64


def test_python_dataset_errors_are_clear():
    class Bad:
        num_classes = 3

        def __len__(self):
            return 64

        def __getitem__(self, i):
            if i == 5:
                raise KeyError("no sample five")
            return np.zeros(4, np.float32), 1

    loader = bg.data.DataLoader(Bad(), 64, shuffle=False, workers=2)
    with pytest.raises(bg.Error, match="item 5 raised KeyError"):
        loader.next()

    class Unlabelled(Bad):
        num_classes = None

    with pytest.raises(bg.InputError, match="how many classes"):
        bg.data.DataLoader(Unlabelled(), 8)

    class WrongShape(Bad):
        def __getitem__(self, i):
            return np.zeros(4 if i == 0 else 5, np.float32), 1

    with pytest.raises(bg.InputError, match="has 5 values"):
        bg.data.DataLoader(WrongShape(), 8, shuffle=False).next()


def test_state_dicts_round_trip_through_safetensors(tmp_path):
    m = mlp(seed=1)
    path = str(tmp_path / "m.safetensors")
    bg.io.save_safetensors(path, m.state_dict(), {"note": "test"})
    tensors, meta = bg.io.load_safetensors(path, require_checksum=True)
    assert meta["note"] == "test" and "bitgrad.checksum" in meta
    m2 = mlp(seed=2)
    assert bg.fingerprint(m2) != bg.fingerprint(m)
    m2.load_state_dict(tensors)
    assert bg.fingerprint(m2) == bg.fingerprint(m)
    with pytest.raises(bg.InputError, match="missing '4.bias'"):
        m2.load_state_dict({k: v for k, v in tensors.items() if k != "4.bias"})


def test_missing_files_are_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError):
        bg.load_config(str(tmp_path / "nope.toml"))
    with pytest.raises(bg.NotFoundError):
        bg.data.fashion_mnist(dir=str(tmp_path / "nowhere"))
    with pytest.raises(FileNotFoundError):
        bg.io.load_safetensors(str(tmp_path / "x.safetensors"))
    with pytest.raises(FileNotFoundError):
        bg.data.csv(str(tmp_path / "x.csv"))
    with pytest.raises(FileNotFoundError):
        bg.instruments.diff(str(tmp_path / "a"), str(tmp_path / "b"))


def test_configuration_errors_are_value_errors_with_the_clis_message(source_dir, tmp_path):
    text = (source_dir / "examples" / "adder.toml").read_text().replace('loss = "mse"', 'loss = "mse"\nprecision = "fp9"')
    p = tmp_path / "bad.toml"
    p.write_text(text)
    line = text.splitlines().index('precision = "fp9"') + 1
    with pytest.raises(ValueError, match=r"bad.toml:%d: \[train\] precision is 'fp9'; expected one of fp32, bf16, fp16" % line):
        bg.Session(str(p))
    import tomllib

    d = tomllib.loads(text)
    with pytest.raises(bg.InputError, match=r"<dict>:\d+: \[train\] precision is 'fp9'"):
        bg.Session(d)
    with pytest.raises(TypeError):
        bg.Session(42)


EXIT_SCRIPT = """
import sys, time
import numpy as np
import bitgrad as bg

class Slow:
    num_classes = 2
    def __len__(self):
        return 1000
    def __getitem__(self, i):
        time.sleep(0.002)  # releases the GIL inside the dataset
        return np.zeros(3, np.float32), i % 2

loader = bg.data.DataLoader(Slow(), 10, workers=int(sys.argv[1]), prefetch=8)
loader.next()
t = bg.from_numpy(np.ones(4, np.float32))
print("leaving with the loader building ahead")
"""


@pytest.mark.parametrize("workers", [1, 4])
def test_the_interpreter_exits_cleanly_while_a_loader_calls_a_python_dataset(tmp_path, workers):
    script = tmp_path / "exit.py"
    script.write_text(EXIT_SCRIPT)
    for _ in range(3):
        r = subprocess.run([sys.executable, str(script), str(workers)], capture_output=True, text=True, timeout=120,
                           env=dict(os.environ))
        assert r.returncode == 0, r.stderr
        assert "leaving" in r.stdout
