"""Runs one ONNX backend node test through bitgrad (the table of onnx_ops.py) and compares its outputs
with ONNX's tolerances; run_node_tests.py is the command around it (docs/onnx.md)."""
import pathlib
import re
import time

import numpy as np
import onnx
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

import onnx_ops
from onnx_ops import NATIVE, OPS, STORAGE, Node, Skip, Value, check_types, to_numpy, to_value, type_name

# ONNX's own pass criterion, not a bound of ours: the defaults of its backend test loader
# (onnx/backend/test/loader/__init__.py: rtol 1e-3, atol 1e-7; node tests carry no override). The
# expected outputs are float32 files written once by ONNX's numpy reference implementations, on
# unknown machines and in unknown orders, so their own error cannot be bounded here; pass counts
# (pass_floor.txt) are defined against this criterion. It is 2^13 u32 relative: a correct float32
# evaluation of any node's formula passes, a wrong op, axis or attribute (errors of the size of the
# values) does not.
RTOL, ATOL = 1e-3, 1e-7


class Fail(Exception):
    pass


def read_tensor(path):
    t = onnx.TensorProto()
    t.ParseFromString(path.read_bytes())
    return t


def data_type(t, declared):
    """A tensor file's element type; ONNX 1.12's data store bfloat16 as uint16 bits, the model declares bfloat16."""
    return TP.BFLOAT16 if declared == TP.BFLOAT16 and t.data_type == TP.UINT16 else t.data_type


def tensor_value(t, declared=None):
    ty = data_type(t, declared)
    if ty not in STORAGE:
        raise Skip("%s data: bitgrad has no dtype that holds it" % type_name(ty))
    return to_value(numpy_helper.to_array(t), ty)


def attributes(node):
    out = {}
    for a in node.attribute:
        if a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS):
            raise Skip("control flow: %s has a subgraph" % node.op_type)
        if a.type == onnx.AttributeProto.TENSOR:
            out[a.name] = (numpy_helper.to_array(a.t), a.t.data_type)
        elif a.type == onnx.AttributeProto.SPARSE_TENSOR:
            out[a.name] = "sparse"
        else:
            out[a.name] = helper.get_attribute_value(a)
    return out


def run_node(proto, env, opset, expanded):
    if proto.domain not in ("", "ai.onnx"):
        raise Skip("domain %s" % proto.domain)
    if proto.op_type not in OPS:
        raise Skip("no mapping for %s%s" % (proto.op_type, " (in the expanded graph)" if expanded else ""))
    fn, types = OPS[proto.op_type]
    ins = [env[name] if name else None for name in proto.input]
    node = Node(proto, attributes(proto), ins, opset, [bool(name) for name in proto.output])
    check_types(node, types)
    try:
        outs = fn(node)
    except Skip:
        raise
    except Exception as e:
        raise Fail("%s raised %s: %s" % (proto.op_type, type(e).__name__, e))
    unread = sorted(set(node.attrs) - node.used)
    if unread:  # an attribute the entry never looked at could change the result
        raise Skip("%s attribute %s not handled by the mapping" % (proto.op_type, ", ".join(unread)))
    if not isinstance(outs, (list, tuple)):
        outs = [outs]
    first = next((v for v in ins if v is not None), None)
    for name, out in zip(proto.output, outs):
        if not name:
            continue
        if out is None:
            raise Fail("%s gave no value for output %s" % (proto.op_type, name))
        if not isinstance(out, Value):  # a tensor: the first input's type when it has that storage
            out = Value(out, first.ty if first is not None and STORAGE[first.ty] == out.dtype else NATIVE[out.dtype])
        if out.t.dtype != STORAGE[out.ty]:
            raise Fail("%s output %s: a %s tensor for ONNX %s (stored as %s)"
                       % (proto.op_type, name, out.t.dtype.name, type_name(out.ty), STORAGE[out.ty].name))
        env[name] = out
    missing = [name for name in proto.output[len(outs):] if name]
    if missing:
        raise Fail("%s gave no value for %s" % (proto.op_type, ", ".join(missing)))


def compare(name, got, expected_proto, declared):
    ety = data_type(expected_proto, declared)
    expected = numpy_helper.to_array(expected_proto)
    if ety == TP.BFLOAT16:
        expected = (expected.astype(np.uint32) << 16).view(np.float32)
    if got.ty != ety:
        raise Fail("output %s: dtype %s, expected %s" % (name, type_name(got.ty), type_name(ety)))
    a = to_numpy(got)
    if a.shape != expected.shape:
        raise Fail("output %s: shape %s, expected %s" % (name, list(a.shape), list(expected.shape)))
    if ety in (TP.FLOAT, TP.DOUBLE, TP.FLOAT16, TP.BFLOAT16):
        try:
            np.testing.assert_allclose(a, expected.astype(a.dtype), rtol=RTOL, atol=ATOL, equal_nan=True)
        except AssertionError as e:
            raise Fail("output %s: %s" % (name, " ".join(str(e).split())[:300]))
    elif not np.array_equal(a, expected):
        bad = int(np.sum(a != expected))
        raise Fail("output %s: %d of %d values differ" % (name, bad, a.size))


def run_test(test_dir):
    model = onnx.load(str(test_dir / "model.onnx"))
    g = model.graph
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 1)
    expanded = len(g.node) > 1
    init = {t.name for t in g.initializer}
    inputs = [i for i in g.input if i.name not in init]
    for vi in list(inputs) + list(g.output):
        if not vi.type.HasField("tensor_type"):
            raise Skip("a %s input or output (bitgrad has tensors only)" % vi.type.WhichOneof("value"))
    sets = sorted(p for p in test_dir.glob("test_data_set_*") if p.is_dir())
    if not sets:
        raise Skip("no test data set")
    for ds in sets:
        env = {t.name: tensor_value(t) for t in g.initializer}
        files = sorted(ds.glob("input_*.pb"), key=lambda p: int(p.stem.split("_")[1]))
        for vi, f in zip(inputs, files):
            env[vi.name] = tensor_value(read_tensor(f), vi.type.tensor_type.elem_type)
        for proto in g.node:
            run_node(proto, env, opset, expanded)
        outs = sorted(ds.glob("output_*.pb"), key=lambda p: int(p.stem.split("_")[1]))
        for vo, f in zip(g.output, outs):
            compare(vo.name, env[vo.name], read_tensor(f), vo.type.tensor_type.elem_type)
    return len(sets)


def group_of(test_dir, model_ops):
    """The op type a test belongs to: its node's, or for an expanded graph the op it expands."""
    base = test_dir.name[:-len("_expanded")] if test_dir.name.endswith("_expanded") else None
    if len(model_ops) == 1 and not base:
        return model_ops[0]
    if base and (test_dir.parent / base / "model.onnx").exists():
        ops = [n.op_type for n in onnx.load(str(test_dir.parent / base / "model.onnx")).graph.node]
        if len(ops) == 1:
            return ops[0] + " (expanded)"
    others = sorted(set(model_ops) - {"Constant"})  # a node fed by constants: its op
    return others[0] if len(others) == 1 else "graph " + test_dir.name


def run_all(data_dir, pattern=None, on_result=None):
    """Every test under data_dir (matching the regular expression pattern): a list of
    {"test", "op", "status": pass | composed | fail | skip, "reason"} and the seconds it took. A test that
    passes only through a composition the runner writes (onnx_ops.composed) is "composed", its reason the
    route: it is not counted as a pass."""
    tests = sorted(p for p in pathlib.Path(data_dir).iterdir() if p.is_dir() and p.name.startswith("test_"))
    if pattern:
        tests = [t for t in tests if re.search(pattern, t.name)]
    start = time.perf_counter()
    results = []
    for t in tests:
        try:
            ops = [n.op_type for n in onnx.load(str(t / "model.onnx")).graph.node]
            group = group_of(t, ops)
        except Exception as e:  # a model the onnx package cannot read: the data's problem, said so
            r = {"test": t.name, "op": "unreadable", "status": "skip", "reason": "unreadable model: %s" % e}
        else:
            onnx_ops.ROUTE.clear()
            try:
                run_test(t)
                if onnx_ops.ROUTE:
                    r = {"test": t.name, "op": group, "status": "composed", "reason": "; ".join(sorted(set(onnx_ops.ROUTE)))}
                else:
                    r = {"test": t.name, "op": group, "status": "pass"}
            except Skip as e:
                r = {"test": t.name, "op": group, "status": "skip", "reason": str(e)}
            except Fail as e:
                r = {"test": t.name, "op": group, "status": "fail", "reason": str(e)}
            except Exception as e:  # in the runner itself: a failure too, never hidden
                r = {"test": t.name, "op": group, "status": "fail", "reason": "runner: %s: %s" % (type(e).__name__, e)}
        results.append(r)
        if on_result:
            on_result(r)
    return results, time.perf_counter() - start
