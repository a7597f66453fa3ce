"""An imported model through the CLI: torchvision's ResNet-18 exported by torch 1.13 and
trained with `[model] onnx = "resnet18.onnx"` has the same fingerprint at threads 1/2/3, on 2 ranks and
loader workers 0/2 (contract T1, T2); `bitgrad export RUN --safetensors` gives PyTorch's names, so
load_state_dict(..., strict=True) takes the trained weights and BatchNorm's buffers, and
`--onnx` writes a model onnx.checker accepts and bitgrad imports again with the same bits."""
import copy
import os
import re
import subprocess

import numpy as np
import pytest

torch = pytest.importorskip("torch")
onnx = pytest.importorskip("onnx")
pytest.importorskip("torchvision")

import bitgrad as bg  # noqa: E402
import parity_bounds as pb  # noqa: E402
from onnx_models import bg_input, export, make  # noqa: E402
from test_parity_training import read_safetensors  # noqa: E402

STEPS = 2
CONFIG = """seed = 1
[data]
dataset = "synthetic"
samples = 64
shape = [3, 32, 32]
classes = 10
[model]
onnx = "resnet18.onnx"
[train]
batch_size = 8
[optimizer]
type = "sgd"
lr = 0.01
momentum = 0.9
"""


def train(cli, config, out, threads, workers):
    r = subprocess.run([cli, "train", str(config), "--steps", str(STEPS), "--out", str(out), "--threads", str(threads),
                        "--workers", str(workers)], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    m = re.search(r"^fingerprint ([0-9a-f]{32})$", r.stdout, re.M)
    assert m, r.stdout
    return m.group(1)


def test_resnet18_from_onnx_trains_reproducibly_and_goes_back_to_torch(cli, tmp_path):
    m, example, _ = make("resnet18")
    export(m, example, str(tmp_path / "resnet18.onnx"))
    config = tmp_path / "resnet18.toml"
    config.write_text(CONFIG)
    prints = {(t, w): train(cli, config, tmp_path / ("run-%d-%d" % (t, w)), t, w) for t, w in [(1, 0), (2, 2), (3, 0)]}
    assert len(set(prints.values())) == 1, prints

    run = tmp_path / "run-1-0"
    st, onnx_out = tmp_path / "trained.safetensors", tmp_path / "trained.onnx"
    r = subprocess.run([cli, "export", str(run), "--safetensors", str(st), "--onnx", str(onnx_out)], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    tensors, _ = read_safetensors(str(st))
    back = make("resnet18")[0]
    assert sorted(tensors) == sorted(back.state_dict())
    back.load_state_dict({k: torch.tensor(v) for k, v in tensors.items()}, strict=True)
    assert int(back.state_dict()["bn1.num_batches_tracked"]) == STEPS

    onnx.checker.check_model(onnx.load(str(onnx_out)))
    g = bg.onnx.load(str(onnx_out)).eval()  # a module starts in training mode, as torch's: eval() as for `back`
    for name, t in list(g.named_parameters()) + list(g.named_buffers()):
        if not name.endswith("num_batches_tracked"):
            assert np.array_equal(t.detach().numpy(), tensors[name]), name  # the same bits
    x = np.random.default_rng(3).standard_normal((8, 3, 32, 32)).astype(np.float32)
    back.eval()
    ref = copy.deepcopy(back).double()
    with torch.no_grad():
        want = ref(torch.as_tensor(x.astype(np.float64))).numpy()
        theirs = back(torch.as_tensor(x)).numpy()
    # both float32 forwards against torch's in float64 on the same values (parity_bounds.py): bitgrad's
    # error <= max(gamma_prob(n) * S, K_TORCH * torch's error), n = the roundings on an output's path
    # (pb.path_roundings, 32723: gamma(n) would be 2e-3, gamma_prob(n) is 8.6e-5). A bound fitted to
    # |bitgrad - torch| (1e-5) failed: 8.2e-6 on one CPU, 1.21e-5 on another (torch's side moves).
    pb.check_vs_reference("resnet18 eval forward", g(bg_input(x)).detach().numpy(), theirs, want,
                          pb.gamma_prob(pb.path_roundings(back), pb.U32) * pb.scale(want))



def test_resnet18_from_onnx_on_two_ranks_gives_the_bits_of_one_process(cli, tmp_path):
    # BatchNormalization in training mode over ranks: the whole batch's statistics are exchanged
    # (numerics §20, §31), so 2 ranks of 32 samples each give one process's fingerprint (T6)
    import shutil
    mpiexec = shutil.which("mpiexec")
    if not mpiexec:
        pytest.skip("no mpiexec")
    m, example, _ = make("resnet18")
    export(m, example, str(tmp_path / "resnet18.onnx"))
    config = tmp_path / "resnet18.toml"
    config.write_text(CONFIG.replace("batch_size = 8", "batch_size = 64"))

    def fingerprint(out, launcher=()):
        r = subprocess.run([*launcher, cli, "train", str(config), "--steps", "1", "--out", str(tmp_path / out), "--threads", "1"],
                           capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, r.stderr
        return re.search(r"^fingerprint ([0-9a-f]{32})$", r.stdout, re.M).group(1)

    assert fingerprint("ranks", (mpiexec, "--oversubscribe", "--allow-run-as-root", "--bind-to", "none", "-n", "2")) == fingerprint("one")


def test_batch_norm_of_an_imported_graph_refuses_micro_batches(cli, tmp_path):
    # its statistics would be those of each micro-batch (contract T5): refused as a batchnorm layer is
    m, example, _ = make("resnet18")
    export(m, example, str(tmp_path / "resnet18.onnx"))
    config = tmp_path / "resnet18.toml"
    config.write_text(CONFIG)
    r = subprocess.run([cli, "train", str(config), "--steps", "1", "--out", str(tmp_path / "run"), "--accumulate", "2"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode != 0
    assert "accumulate = 2 with a batchnorm layer is not supported" in r.stderr, r.stderr


MLP_CONFIG = """seed = 3
[data]
dataset = "synthetic"
samples = 256
shape = [8]
classes = 10
[model]
onnx = "mlp.onnx"
[train]
batch_size = 128
[optimizer]
type = "sgd"
lr = 0.05
momentum = 0.9
"""


def test_an_imported_graph_with_dropout_keeps_the_contract(cli, tmp_path):
    # a torch MLP with Dropout (training mode, a free batch dimension): threads and workers (T1, T2),
    # micro-batches (T5), resume (T7), the scalar code path (T8) and, with MPI, 2 ranks (T6) give the
    # imported graph one fingerprint, as for a layer list
    import shutil
    import warnings
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Dropout(0.2), torch.nn.Linear(16, 10))
    m.train()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(m, torch.randn(4, 8), str(tmp_path / "mlp.onnx"), opset_version=17, training=torch.onnx.TrainingMode.TRAINING,
                          do_constant_folding=False, input_names=["input"], output_names=["output"], dynamic_axes={"input": {0: "batch"}})
    config = tmp_path / "mlp.toml"
    config.write_text(MLP_CONFIG)

    def fingerprint(out, *extra, launcher=(), env=None, steps="6", resume=False):
        where = ["--resume", str(tmp_path / out)] if resume else ["--out", str(tmp_path / out)]
        r = subprocess.run([*launcher, cli, "train", str(config), "--steps", steps, *where, *extra],
                           capture_output=True, text=True, timeout=600, env=env)
        assert r.returncode == 0, r.stderr
        return re.search(r"^fingerprint ([0-9a-f]{32})$", r.stdout, re.M).group(1)

    want = fingerprint("one")
    fingerprint("resumed", "--checkpoint-every", "3", steps="3")
    assert fingerprint("resumed", steps="6", resume=True) == want  # T7
    assert fingerprint("scalar", env=dict(os.environ, BITGRAD_ISA="scalar")) == want  # T8: another code path
    assert fingerprint("threads", "--threads", "3", "--workers", "2") == want
    assert fingerprint("micro", "--accumulate", "4") == want
    mpiexec = shutil.which("mpiexec")
    if mpiexec:
        assert fingerprint("ranks", launcher=(mpiexec, "--oversubscribe", "--allow-run-as-root", "--bind-to", "none", "-n", "2")) == want


def test_a_model_path_relative_to_the_configuration_is_found_by_every_tool(cli, tmp_path):
    # [model] onnx = "../models/mlp.onnx" beside the configuration, trained from another directory:
    # the run keeps the resolved path, so export and diff (which replays a step) find the file too
    import warnings
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 10))
    (tmp_path / "models").mkdir()
    (tmp_path / "configs").mkdir()
    (tmp_path / "elsewhere").mkdir()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(m, torch.randn(4, 8), str(tmp_path / "models" / "mlp.onnx"), opset_version=17, training=torch.onnx.TrainingMode.TRAINING,
                          do_constant_folding=False, input_names=["input"], output_names=["output"], dynamic_axes={"input": {0: "batch"}})
    (tmp_path / "configs" / "mlp.toml").write_text(MLP_CONFIG.replace('onnx = "mlp.onnx"', 'onnx = "../models/mlp.onnx"'))

    def run(*args, code=0):
        r = subprocess.run([cli, *args], capture_output=True, text=True, timeout=600, cwd=str(tmp_path / "elsewhere"))
        assert r.returncode == code, (args, r.returncode, r.stdout, r.stderr)
        return r.stdout

    for name, lr in (("a", "0.05"), ("b", "0.04")):
        text = (tmp_path / "configs" / "mlp.toml").read_text().replace("lr = 0.05", "lr = " + lr)
        (tmp_path / "configs" / (name + ".toml")).write_text(text)
        run("train", "../configs/%s.toml" % name, "--steps", "2", "--out", "../run-" + name)
    run("export", str(tmp_path / "run-a"), "--onnx", str(tmp_path / "a.onnx"))
    assert (tmp_path / "a.onnx").stat().st_size > 0
    out = run("diff", str(tmp_path / "run-a"), str(tmp_path / "run-b"), code=1)  # 1: they differ (2: could not compare)
    assert "replayed:" in out, out
