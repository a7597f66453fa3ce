"""Bad input from Python is an exception of the fitting kind with the CLI's message, never a
crash: bitgrad.Error is the base; shapes, dtypes and values are ValueErrors (bitgrad.InputError),
autograd misuse RuntimeErrors (bitgrad.AutogradError), missing files FileNotFoundErrors
(bitgrad.NotFoundError); a wrong Python type is a TypeError."""
import numpy as np
import pytest

import bitgrad as bg


def test_the_exception_hierarchy():
    assert issubclass(bg.InputError, bg.Error) and issubclass(bg.InputError, ValueError)
    assert issubclass(bg.AutogradError, bg.Error) and issubclass(bg.AutogradError, RuntimeError)
    assert issubclass(bg.NotFoundError, bg.Error) and issubclass(bg.NotFoundError, FileNotFoundError)
    # a Ctrl-C is not an error: `except Exception` does not swallow it
    assert issubclass(bg.Interrupted, KeyboardInterrupt) and not issubclass(bg.Interrupted, Exception)


@pytest.mark.parametrize("call,message", [
    (lambda: bg.matmul(bg.ones(2, 3), bg.ones(4, 5)), r"matmul: inner dimensions differ: a is \[2, 3\], b is \[4, 5\]"),
    (lambda: bg.ones(2, 3) + bg.ones(4), "broadcast"),
    (lambda: bg.exp(bg.ones(2, dtype=bg.int64)), "int64|i64"),
    (lambda: bg.ones(2, 3).reshape(4, 2), r"cannot reshape \[2, 3\]"),
    (lambda: bg.zeros(-1, 2), "dimension 0 is -1"),
    (lambda: bg.zeros(1, 1, 1, 1, 1, 1, 1, 1, 1), "at most 8 dimensions"),
    (lambda: bg.arange(-3), "expected >= 0"),
    (lambda: bg.ones(3).sum(axis=4), "axis"),
    (lambda: bg.cross_entropy(bg.ones(2, 3), bg.tensor([0, 3])), "3"),
    (lambda: bg.cross_entropy(bg.ones(2, 3), bg.tensor([0, 1]), reduction="avg"), "reduction is 'avg'"),
    (lambda: bg.conv2d(bg.ones(1, 2, 5, 5), bg.ones(3, 1, 3, 3)), "conv2d"),
    (lambda: bg.ones(2).item(), "2 elements"),
    (lambda: bg.nn.Linear(0, 3), "Linear: features must be positive"),
    (lambda: bg.nn.Dropout(1.5), r"Dropout: probability must be in \[0, 1\)"),
    (lambda: bg.nn.Sequential(bg.nn.Linear(4, 3)).output_shape([2, 5]), "Linear"),
    (lambda: bg.nn.Linear(4, 3)(bg.ones(2, 5)), "linear"),
    (lambda: bg.nn.Context(precision="fp9"), "fp9"),
    (lambda: bg.optim.SGD([], lr=0.1), "no parameters"),
    (lambda: bg.optim.SGD([bg.ones(2)], lr=0.1), "not a leaf tensor that requires grad"),
    (lambda: bg.optim.Schedule("linear", lr=0.1), "kind is 'linear'"),
    (lambda: bg.set_isa("sse9"), "sse9"),
    (lambda: bg.set_num_threads(0), "thread"),
    (lambda: bg.ones(2).to(bg.bfloat16) + 1, "bf16|bfloat16"),
    (lambda: bg.data.DataLoader(bg.data.synthetic(10, [2]), 0), "batch"),
    (lambda: bg.tensor([[1, 2], [3]]), "not a rectangular array"),
    (lambda: bg.nn.Sequential(bg.nn.Dropout(0.1, 0), bg.nn.Linear(2, 2), bg.nn.Dropout(0.2, 0)), "two Dropout layers have layer_id 0"),
])
def test_bad_input_is_a_value_error_naming_what_was_expected(call, message):
    with pytest.raises(bg.InputError, match=message):
        call()


@pytest.mark.parametrize("call", [
    lambda: bg.exp(None),
    lambda: bg.add(bg.ones(2), None),
    lambda: bg.matmul(np.ones((2, 2)), bg.ones(2, 2)),
    lambda: bg.ones(2) @ 3,
    lambda: bg.zeros("a"),
    lambda: bg.nn.Sequential(3),
    lambda: bg.nn.Linear(2, 2)(None),
    lambda: bg.optim.SGD([3], lr=0.1),
    lambda: bg.fingerprint(None),
    lambda: bg.ones(2)[1.5],
    lambda: bg.from_dlpack(object()),
    lambda: bg.tensor([[1, None], [3, 4]]),
])
def test_a_wrong_python_type_is_a_type_error(call):
    with pytest.raises(TypeError):
        call()


def test_errors_keep_the_interpreter_usable():
    for _ in range(3):
        with pytest.raises(bg.Error):
            bg.matmul(bg.ones(2, 3), bg.ones(2, 3))
    x = bg.ones(2, requires_grad=True)
    y = (x * 3).sum()
    y.backward()
    assert x.grad.tolist() == [3, 3]


def test_in_place_modification_of_a_saved_tensor_is_refused():
    x = bg.ones(3, requires_grad=True)
    w = bg.ones(3)
    y = (x * w).sum()
    w.fill_(2.0)
    with pytest.raises(bg.AutogradError, match="modified in place"):
        y.backward()


def _cpu_has(*flags):
    try:
        with open("/proc/cpuinfo") as f:
            words = set(f.read().split())
    except OSError:
        return False
    return all(fl in words for fl in flags)


def _unavailable(isa, hide, flags):
    # a path this CPU has is "hidden by" the variable; one it lacks, "does not support"
    if _cpu_has(*flags):
        return f"{isa} is hidden by BITGRAD_HIDE_ISA={hide}"
    return f"this CPU does not support {isa}"


AVX512 = ("avx512f", "avx512dq", "avx512bw", "avx512vl", "fma")


@pytest.mark.parametrize("hide, args, isa_env, message", [
    ("bogus", ["selftest"], None, "BITGRAD_HIDE_ISA=bogus: expected avx512 (hide AVX-512) or avx2"),
    ("avx2", ["selftest", "--isa", "avx2"], None, "set_isa: " + _unavailable("avx2", "avx2", ("avx2", "fma"))),
    ("avx2", ["selftest", "--isa", "avx512"], None, "set_isa: " + _unavailable("avx512", "avx2", AVX512)),
    ("avx512", ["selftest"], "avx512", "BITGRAD_ISA=avx512: " + _unavailable("avx512", "avx512", AVX512)),
])
def test_a_hidden_or_unknown_code_path_is_refused_by_name(hide, args, isa_env, message):
    # BITGRAD_HIDE_ISA (numerics.md §1): a wrong value is an error naming the variable; a code path
    # asked for is refused naming why: hidden by the variable, or absent from the CPU
    import os
    import subprocess
    exe = os.environ.get("BITGRAD_BIN")
    if not exe:
        pytest.skip("BITGRAD_BIN is not set (ctest sets it)")
    env = dict(os.environ, BITGRAD_HIDE_ISA=hide)
    env.pop("BITGRAD_ISA", None)
    if isa_env:
        env["BITGRAD_ISA"] = isa_env
    r = subprocess.run([exe] + args, capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode != 0 and message in r.stderr, (r.returncode, r.stdout, r.stderr)


def test_a_message_quoting_bytes_that_are_not_utf8_escapes_them(tmp_path):
    # a safetensors key with bytes 0xff 0xfe: the error names them as \xNN (it was InputError(''))
    import struct
    header = b'{"w\xff\xfeq": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}'
    path = tmp_path / "bad.safetensors"
    path.write_bytes(struct.pack("<Q", len(header)) + header + b"\0\0\0\0")
    with pytest.raises(bg.InputError) as e:
        bg.io.load_safetensors(str(path))
    assert "not valid JSON" in str(e.value) and "\\xff" in str(e.value), str(e.value)
