"""The ONNX node-test runner (tests/onnx, docs/onnx.md) can fail: a wrong answer, a wrong dtype or an
exception of a mapped op is a failure, an attribute the mapping never reads a skip; the dtype
mapping keeps every value. Skipped without python3-onnx or libonnx-testdata."""
import os
import pathlib
import sys

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
DATA = "/usr/share/libonnx-testdata/data/node"
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "onnx"))

import bitgrad as bg  # noqa: E402
import node_runner  # noqa: E402
import onnx_ops  # noqa: E402
from onnx import TensorProto as TP  # noqa: E402

needs_data = pytest.mark.skipif(not os.path.isdir(DATA), reason="no libonnx-testdata at " + DATA)


def run(name):
    (r,), _ = node_runner.run_all(DATA, "^%s$" % name)
    return r


@needs_data
def test_a_mapped_op_passes():
    assert run("test_exp")["status"] == "pass"
    assert run("test_cast_BFLOAT16_to_FLOAT")["status"] == "pass"  # bfloat16 read from its uint16 bits


@needs_data
def test_a_wrong_answer_fails(monkeypatch):
    monkeypatch.setitem(onnx_ops.OPS, "Exp", (lambda n: bg.sqrt(n.x(0)), onnx_ops.F))
    r = run("test_exp")
    assert r["status"] == "fail" and "tolerance" in r["reason"]


@needs_data
def test_a_wrong_dtype_fails(monkeypatch):
    monkeypatch.setitem(onnx_ops.OPS, "Exp", (lambda n: bg.exp(n.x(0)).to(bg.float64), onnx_ops.F))
    r = run("test_exp")
    assert r["status"] == "fail" and "dtype float64, expected float32" in r["reason"]


@needs_data
def test_an_exception_fails(monkeypatch):
    monkeypatch.setitem(onnx_ops.OPS, "Exp", (lambda n: bg.matmul(n.x(0), n.x(0)), onnx_ops.F))
    r = run("test_exp")
    assert r["status"] == "fail" and "InputError" in r["reason"]


@needs_data
def test_an_unread_attribute_skips(monkeypatch):
    monkeypatch.setitem(onnx_ops.OPS, "ArgMax", (lambda n: bg.argmax(n.x(0), 0, True), onnx_ops.F))
    r = run("test_argmax_default_axis_example")
    assert r["status"] == "skip" and "keepdims not handled" in r["reason"]


def test_dtype_mapping_keeps_values():
    for ty, a in [(TP.INT32, np.array([-2**31, 7, 2**31 - 1], np.int32)), (TP.BOOL, np.array([True, False])),
                  (TP.INT8, np.array([-128, 127], np.int8)), (TP.UINT8, np.array([0, 255], np.uint8)),
                  (TP.DOUBLE, np.array([0.1, -2.5])), (TP.FLOAT16, np.array([1.5, -0.25], np.float16))]:
        v = onnx_ops.to_value(a, ty)
        assert v.t.dtype == onnx_ops.STORAGE[ty]
        back = onnx_ops.to_numpy(v)
        assert back.dtype == a.dtype and np.array_equal(back, a)
    with pytest.raises(onnx_ops.Skip, match="2\\^63"):
        onnx_ops.to_value(np.array([2**63], np.uint64), TP.UINT64)
    with pytest.raises(onnx_ops.Skip, match="out of range"):  # an int32 result bitgrad computed beyond int32
        onnx_ops.to_numpy(onnx_ops.Value(bg.tensor(np.array([2**31], np.int64)), TP.INT32))


@needs_data
def test_a_composition_the_runner_writes_is_not_a_pass(monkeypatch):
    def spelled_out(n):  # the right values, but the arithmetic written by the runner, not a bitgrad op
        onnx_ops.composed("exp spelled out")
        return bg.exp(n.x(0))
    monkeypatch.setitem(onnx_ops.OPS, "Exp", (spelled_out, onnx_ops.F))
    r = run("test_exp")
    assert r["status"] == "composed" and r["reason"] == "exp spelled out"
    assert run("test_add_bcast")["status"] == "pass" and run("test_add_uint8")["status"] == "composed"
