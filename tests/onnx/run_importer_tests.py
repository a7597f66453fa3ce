"""ONNX's backend node tests through the C++ importer: every test model read by
bitgrad.onnx.load and run by GraphModule.run, outputs compared as tests/onnx/run_node_tests.py does
(rtol 1e-3, atol 1e-7, NaN equal to NaN; integers and bools exactly). Counted separately for the
single-node tests and the multi-node `*_expanded` ones; a model the importer refuses (an opset
before 13, an op, attribute or dtype it lacks) is 'refused' with the first line of its error.

    PYTHONPATH=build/python /usr/bin/python3 tests/onnx/run_importer_tests.py [-v] [-k SUBSTRING]
        [--floor SINGLE EXPANDED]   # ctest Onnx.ImporterNodeTests: fails below these passes, or on any failure
"""
import argparse
import collections
import glob
import os
import re
import sys

import numpy as np

try:
    import onnx
    from onnx import numpy_helper
except ImportError:  # Debian: python3-onnx
    print("python3-onnx is not installed: skipped")
    sys.exit(77)

import bitgrad as bg

DATA = "/usr/share/libonnx-testdata/data/node"


def to_bg(a):
    if a.dtype == np.float32 or a.dtype == np.float64:
        return bg.tensor(np.array(a, order="C"))
    if a.dtype in (np.int64, np.int32):
        return bg.tensor(np.array(a, dtype=np.int64, order="C"), dtype=bg.int64)
    if a.dtype == np.bool_:
        return bg.tensor(np.array(a, dtype=np.uint8, order="C"), dtype=bg.uint8)
    raise TypeError("input dtype %s" % a.dtype)


def read(path):
    t = onnx.TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    return numpy_helper.to_array(t)


def run_one(d):
    model = os.path.join(d, "model.onnx")
    if "training" in os.path.basename(d):
        # BatchNormalization's training_mode and training Dropout: the importer runs here with
        # training=False (evaluation semantics), and Dropout's expected mask is NumPy's random draw
        return "skip", "training-mode node (BatchNormalization running statistics in ONNX's convention, Dropout's random mask)"
    try:
        g = bg.onnx.load(model, training=False)
    except Exception as e:  # noqa: BLE001
        msg = str(e).replace(model, "model.onnx")
        return "refused", re.sub(r"node '[^']*' ", "", msg)[:160]
    for ds in sorted(glob.glob(os.path.join(d, "test_data_set_*"))):
        ins = [read(p) for p in sorted(glob.glob(os.path.join(ds, "input_*.pb")), key=lambda p: int(p.split("_")[-1][:-3]))]
        outs = [read(p) for p in sorted(glob.glob(os.path.join(ds, "output_*.pb")), key=lambda p: int(p.split("_")[-1][:-3]))]
        try:
            got = g.run([to_bg(a) for a in ins])
        except Exception as e:  # noqa: BLE001
            return "refused", ("run: " + str(e).replace(model, "model.onnx"))[:160]
        for want, t in zip(outs, got):
            a = np.array(bg.contiguous(t).numpy())
            if a.shape != want.shape:
                return "fail", "shape %s, expected %s" % (a.shape, want.shape)
            if want.dtype.kind == "f":
                if a.dtype != want.dtype:
                    return "fail", "dtype %s, expected %s" % (a.dtype, want.dtype)
                try:
                    # ONNX's pass criterion (node_runner.py's RTOL, ATOL: its loader's defaults)
                    np.testing.assert_allclose(a, want, rtol=1e-3, atol=1e-7, equal_nan=True)
                except AssertionError as e:
                    return "fail", str(e).strip().splitlines()[0][:160]
            elif not np.array_equal(a.astype(np.int64), want.astype(np.int64)):
                return "fail", "values differ"
    return "pass", ""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-k", default="")
    ap.add_argument("-v", action="store_true")
    ap.add_argument("--floor", nargs=2, type=int, default=None)
    args = ap.parse_args()
    if not os.path.isdir(DATA):
        print("no ONNX test data at %s (Debian: libonnx-testdata)" % DATA)
        return 77
    counts = {"single": collections.Counter(), "expanded": collections.Counter()}
    fails = 0
    reasons = collections.Counter()
    for d in sorted(glob.glob(os.path.join(DATA, "test_*"))):
        name = os.path.basename(d)
        if args.k not in name:
            continue
        kind = "expanded" if name.endswith("_expanded") else "single"
        status, why = run_one(d)
        counts[kind][status] += 1
        if status != "pass":
            reasons[(status, why)] += 1
        fails += status == "fail"
        if args.v or status == "fail":
            print("%-60s %-8s %s" % (name, status, why))
    for kind, c in counts.items():
        print("%-8s pass %d, fail %d, refused %d, skip %d" % (kind, c["pass"], c["fail"], c["refused"], c["skip"]))
    if args.v:
        for (status, why), n in reasons.most_common(40):
            print("%5d %s %s" % (n, status, why))
    if args.floor and (counts["single"]["pass"] < args.floor[0] or counts["expanded"]["pass"] < args.floor[1]):
        print("fewer pass than the floor %d single, %d expanded" % tuple(args.floor))
        return 1
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
