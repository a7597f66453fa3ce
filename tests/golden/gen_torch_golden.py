#!/usr/bin/python3
"""Golden values from an independent implementation: PyTorch (Debian python3-torch) in f64.

Writes tests/golden/torch_ops.json: for each case the inputs, the output and the gradients of
sum(output * gout) with respect to the differentiable inputs. tests/ops/torch_golden_test.cpp
runs the same op in bitgrad (f64) and compares within a bound derived there, 2 gamma(n) times the
result's scale for a case of n values (the evaluation orders differ, so only the values, not the
bits, can agree); copies and selections exactly.

Usage: /usr/bin/python3 tests/golden/gen_torch_golden.py > tests/golden/torch_ops.json
"""
import json
import sys

import numpy as np
import torch

torch.set_default_dtype(torch.float64)
rng = np.random.default_rng(20261121)


def t(shape, lo=-1.0, hi=1.0):
    return torch.tensor(rng.uniform(lo, hi, size=shape), requires_grad=True)


def idx(values):
    return torch.tensor(values, dtype=torch.int64)


cases = []


def case(name, inputs, fn, ints=()):
    out = fn(*inputs, *ints)
    gout = torch.tensor(rng.normal(size=tuple(out.shape)))
    grads = torch.autograd.grad(out, inputs, gout, allow_unused=True)
    cases.append({
        "name": name,
        "inputs": [{"shape": list(x.shape), "data": x.detach().flatten().tolist()} for x in inputs],
        "ints": [{"shape": list(i.shape), "data": i.flatten().tolist()} for i in ints],
        "output": {"shape": list(out.shape), "data": out.detach().flatten().tolist()},
        "gout": gout.flatten().tolist(),
        "grads": [None if g is None else g.flatten().tolist() for g in grads],
    })


case("matmul", [t((5, 7)), t((7, 3))], torch.matmul)
case("matmul_batched", [t((2, 4, 6)), t((2, 6, 3))], torch.matmul)
case("linear", [t((6, 5)), t((4, 5)), t((4,))], torch.nn.functional.linear)
case("softmax", [t((4, 9), -3, 3)], lambda x: torch.softmax(x, -1))
case("log_softmax", [t((4, 9), -3, 3)], lambda x: torch.log_softmax(x, -1))
case("cross_entropy", [t((6, 5), -3, 3)], lambda x, y: torch.nn.functional.cross_entropy(x, y), [idx([0, 4, 2, 2, 1, 3])])
case("mse_loss", [t((5, 3)), t((5, 3))], torch.nn.functional.mse_loss)
case("gelu", [t((3, 7), -4, 4)], torch.nn.functional.gelu)
case("tanh", [t((3, 7), -3, 3)], torch.tanh)
case("sigmoid", [t((3, 7), -5, 5)], torch.sigmoid)
case("exp", [t((9,), -5, 5)], torch.exp)
case("log", [t((9,), 0.1, 10)], torch.log)
case("sqrt", [t((9,), 0.1, 10)], torch.sqrt)
case("pow", [t((2, 5), 0.5, 2), t((5,), -2, 2)], torch.pow)
case("div_broadcast", [t((3, 4)), t((3, 1), 1, 2)], torch.div)
case("sum_axis0", [t((5, 4))], lambda x: x.sum(0))
case("mean", [t((5, 4))], lambda x: x.mean())
case("max_axis1", [t((4, 6))], lambda x: x.max(1).values)
case("index_select", [t((4, 3))], lambda x, i: torch.index_select(x, 0, i), [idx([3, 0, 3, 1])])
case("gather", [t((3, 4))], lambda x, i: torch.gather(x, 1, i), [idx([[0, 3], [2, 2], [1, 0]])])
case("relu", [t((11,))], torch.relu)
case("conv2d", [t((2, 3, 6, 5)), t((4, 3, 3, 3)), t((4,))], lambda x, w, b: torch.nn.functional.conv2d(x, w, b, stride=1, padding=1))
case("conv2d_stride2", [t((2, 2, 7, 7)), t((3, 2, 3, 3))], lambda x, w: torch.nn.functional.conv2d(x, w, stride=2))
case("max_pool2d", [t((2, 3, 6, 6))], lambda x: torch.nn.functional.max_pool2d(x, 2))
case("avg_pool2d", [t((2, 3, 5, 5))], lambda x: torch.nn.functional.avg_pool2d(x, 3, 1))
case("layer_norm", [t((4, 7)), t((7,)), t((7,))], lambda x, g, b: torch.nn.functional.layer_norm(x, (7,), g, b, 1e-5))
case("embedding", [t((6, 4))], lambda w, i: torch.nn.functional.embedding(i, w), [idx([[1, 5, 1], [0, 2, 1]])])

json.dump({"generator": "tests/golden/gen_torch_golden.py", "torch": torch.__version__, "cases": cases}, sys.stdout)
