"""Sizes are checked, never wrapped. A shape whose
element count passes 2^56 or wraps int64 is an error naming what it sized, from Python, from an
ONNX file through bitgrad.onnx.load and through `bitgrad train` (which exited 139 on a 200-byte
file); a float no int64 holds is refused by bitgrad.tensor."""
import subprocess

import numpy as np
import pytest

import bitgrad as bg

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402


def test_element_counts_past_the_bound_are_errors():
    with pytest.raises(bg.Error, match=r"more than 2\^56 elements"):
        bg.zeros(2 ** 32, 2 ** 32)  # numel() was 0
    with pytest.raises(bg.Error, match=r"reshape: .* is more than 2\^56"):
        bg.ones(4).reshape(2 ** 62 + 1, 4).sum()  # 4 elements once wrapped: the sum read past the storage
    with pytest.raises(bg.Error, match="reshape"):
        bg.ones(4).reshape(-1, 2 ** 32, 2 ** 32)
    assert bg.zeros(2 ** 60, 0).shape == (2 ** 60, 0)  # no elements: a shape, whatever the other dimension


def test_a_float_no_int64_holds_is_refused():
    for v in (float("nan"), float("inf"), -float("inf"), 2.0 ** 63, -2.0 ** 64):
        with pytest.raises(bg.InputError, match="has no int64 value"):
            bg.tensor([1.0, v], dtype=bg.int64)
    assert np.array(bg.tensor([1.7, -2.5, -2.0 ** 63], dtype=bg.int64)).tolist() == [1, -2, -2 ** 63]  # truncated, as torch


def hostile_model(path, batch_axis):
    """x [N, 4] (or [4]) reshaped to [2^62 + 1, 4] (4 elements when the product wraps), then summed."""
    shape = helper.make_tensor("shape", TensorProto.INT64, [2], [2 ** 62 + 1, 4])
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4] if batch_axis else [4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [])
    g = helper.make_graph([helper.make_node("Reshape", ["x", "shape"], ["r"], name="huge"),
                           helper.make_node("ReduceSum", ["r"], ["y"], name="sum", keepdims=0)], "hostile", [x], [y], [shape])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, str(path))
    assert path.stat().st_size < 300


def test_a_hostile_onnx_file_is_an_error_naming_its_node(cli, tmp_path):
    hostile_model(tmp_path / "flat.onnx", False)
    with pytest.raises(bg.Error, match=r"node 'huge' \(Reshape\): reshape"):
        bg.onnx.load(str(tmp_path / "flat.onnx"))  # the load-time check at the declared shape
    hostile_model(tmp_path / "m.onnx", True)
    g = bg.onnx.load(str(tmp_path / "m.onnx"))  # a free batch: nothing runs at load
    with pytest.raises(bg.Error, match=r"node 'huge' \(Reshape\): reshape"):
        g(bg.ones(2, 4))
    (tmp_path / "t.toml").write_text('seed = 1\n[data]\ndataset = "synthetic"\nsamples = 64\nshape = [4]\nclasses = 3\n'
                                     '[model]\nonnx = "m.onnx"\n[train]\nbatch_size = 32\n[optimizer]\ntype = "sgd"\nlr = 0.1\n')
    r = subprocess.run([cli, "train", str(tmp_path / "t.toml"), "--steps", "1", "--out", str(tmp_path / "run")],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2, (r.returncode, r.stderr)  # 139 (a segfault) before
    assert "node 'huge' (Reshape): reshape" in r.stderr and "2^56" in r.stderr, r.stderr


def test_the_run_memory_check_measures_an_imported_graph(cli, tmp_path):
    # x [N, 1] expanded to [N, 2^22] (16 MiB a sample), summed back, then a linear layer: at a batch
    # of 8192 its forward alone holds 128 GiB. The pre-check ran the graph at the whole batch to
    # learn its shapes; it now measures a probe forward of 3 samples and refuses the run before
    # the loader takes anything, naming what it needs.
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 1])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3])
    wide = helper.make_tensor("wide", TensorProto.INT64, [2], [1, 2 ** 22])
    axes = helper.make_tensor("axes", TensorProto.INT64, [1], [1])
    w = helper.make_tensor("w", TensorProto.FLOAT, [1, 3], [0.1, -0.2, 0.3])
    g = helper.make_graph([helper.make_node("Expand", ["x", "wide"], ["e"], name="expand"),
                           helper.make_node("ReduceSum", ["e", "axes"], ["s"], name="sum", keepdims=1),
                           helper.make_node("MatMul", ["s", "w"], ["y"], name="mm")], "wide", [x], [y], [wide, axes, w])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(tmp_path / "wide.onnx"))
    (tmp_path / "t.toml").write_text('seed = 1\n[data]\ndataset = "synthetic"\nsamples = 8192\nshape = [1]\nclasses = 3\n'
                                     '[model]\nonnx = "wide.onnx"\n[train]\nbatch_size = 8192\n[optimizer]\ntype = "sgd"\nlr = 0.1\n')
    r = subprocess.run([cli, "train", str(tmp_path / "t.toml"), "--steps", "1", "--out", str(tmp_path / "run")],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert "train: this run needs about" in r.stderr and "GiB available" in r.stderr, r.stderr
