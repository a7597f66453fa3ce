"""The layer table from Python (src/train/layer_table.hpp): every kind of a configuration's
[model] layers is built by bitgrad.nn.from_layers as `bitgrad train` builds it, and the
bitgrad.nn call that its entry names makes the same module: the same class, parameters of the
same names and shapes, and with the same weights the same output bits. A kind whose entry names
no Python call, or a call that makes another module, fails here by its name."""
import tomllib

import numpy as np
import pytest

import bitgrad

KINDS = bitgrad.nn.layer_kinds()


def _table(inline):
    return tomllib.loads("x = " + inline)["x"]


def _layers(kind):
    before = [_table(kind["before"])] if kind["before"] else []
    return before + [dict(type=kind["type"], **_table("{" + kind["options"] + "}"))]


def _input(kind):
    shape = kind["input_shape"]
    rng = np.random.default_rng(7)
    if kind["vocabulary"]:
        return bitgrad.from_numpy(rng.integers(0, kind["vocabulary"], size=shape, dtype=np.int64))
    return bitgrad.from_numpy(rng.standard_normal(shape).astype(np.float32))


def _bits(t):
    return t.detach().numpy().tobytes()


def test_the_table_lists_every_kind_of_the_configuration_once():
    names = [k["type"] for k in KINDS]
    assert len(names) == len(set(names))
    assert {"linear", "conv", "lstm", "transformer_block", "resblock", "tied_head"} <= set(names)


@pytest.mark.parametrize("kind", KINDS, ids=[k["type"] for k in KINDS])
def test_every_kind_is_the_same_module_from_the_table_and_from_python(kind):
    seq = bitgrad.nn.from_layers(_layers(kind), kind["input_shape"], vocabulary=kind["vocabulary"], seed=3)
    built = seq[len(seq) - 1]
    if not kind["python"]:
        # only a layer made from another (a tied head from its embedding) has no call of its own
        assert kind["before"], "%s: the layer table names no bitgrad.nn call that makes it" % kind["type"]
        return
    made = eval("bitgrad.nn." + kind["python"], {"bitgrad": bitgrad})  # noqa: S307 (the table's own text)
    assert type(made) is type(built), "%s: bitgrad.nn.%s makes a %s, the table a %s" % (
        kind["type"], kind["python"], type(made).__name__, type(built).__name__)
    assert [(n, tuple(t.shape)) for n, t in made.named_parameters()] == [(n, tuple(t.shape)) for n, t in built.named_parameters()]
    made.load_state_dict(built.state_dict())
    x = _input(kind)
    for i in range(len(seq) - 1):  # the layers the example needs before it
        x = bitgrad.nn.Sequential(seq[i]).eval()(x)
    a = bitgrad.nn.Sequential(built).eval()(x)
    b = bitgrad.nn.Sequential(made).eval()(x)
    assert _bits(a) == _bits(b)


def test_from_layers_names_the_layer_and_the_key_of_a_mistake():
    with pytest.raises(bitgrad.InputError, match=r"unknown key 'outt' in model.layers\[1\]"):
        bitgrad.nn.from_layers([{"type": "flatten"}, {"type": "linear", "out": 3, "outt": 3}], [1, 2, 3])
    with pytest.raises(bitgrad.InputError, match=r"model.layers\[0\] \(conv\) expects images \[N, C, H, W\], the layer before gives \[1, 5\]"):
        bitgrad.nn.from_layers([{"type": "conv", "out": 3, "kernel": 3}], [1, 5])
    with pytest.raises(bitgrad.InputError, match=r"layers\[0\].out: a set cannot be written in a configuration"):
        bitgrad.nn.from_layers([{"type": "linear", "out": {3}}], [1, 5])
    with pytest.raises(bitgrad.InputError, match=r"layers\[0\].p: nan is not a finite number"):
        bitgrad.nn.from_layers([{"type": "dropout", "p": float("nan")}], [1, 5])
    with pytest.raises(bitgrad.InputError, match="input_shape"):
        bitgrad.nn.from_layers([{"type": "relu"}], [])
    # shapes and vocabularies from outside: whole numbers in range, never truncated or cast by pybind11
    for shape, err, text in [([1, 4.5], TypeError, r"input_shape\[1\] is a float"), ("abc", TypeError, "input_shape is a str"),
                             ([1, 2 ** 70], bitgrad.InputError, r"input_shape\[1\] is 1180591620717411303424"),
                             ([1, 0], bitgrad.InputError, r"input_shape\[1\] is 0; expected a whole number from 1")]:
        with pytest.raises(err, match=text):
            bitgrad.nn.from_layers([{"type": "linear", "out": 3}], shape)
    with pytest.raises(bitgrad.InputError, match="vocabulary is 1180591620717411303424"):
        bitgrad.nn.from_layers([{"type": "relu"}], [1, 2], vocabulary=2 ** 70)
    with pytest.raises(bitgrad.InputError, match="an embedding reads token ids: give vocabulary="):
        bitgrad.nn.from_layers([{"type": "embedding", "dim": 4}], [2, 6])
    with pytest.raises(bitgrad.InputError, match="needs about .* GiB of memory"):  # the parameters, checked before they are taken
        bitgrad.nn.from_layers([{"type": "linear", "out": 2 ** 20}], [1, 2 ** 20])


def test_from_layers_is_the_trainers_model():
    """The layers of a configuration, built from Python with the configuration's seed and init,
    have the trainer's parameters bit for bit (bitgrad.Session builds the same list)."""
    layers = [{"type": "conv", "out": 4, "kernel": 3, "padding": 1}, {"type": "batchnorm"}, {"type": "relu"},
              {"type": "maxpool2d", "kernel": 2}, {"type": "flatten"}, {"type": "linear", "out": 3}]
    toml = "\n".join([
        "seed = 5", "[data]", 'dataset = "synthetic"', "samples = 16", "shape = [2, 6, 6]", "classes = 3", "[model]", "layers = [",
        '  { type = "conv", out = 4, kernel = 3, padding = 1 },', '  { type = "batchnorm" },', '  { type = "relu" },',
        '  { type = "maxpool2d", kernel = 2 },', '  { type = "flatten" },', '  { type = "linear", out = 3 },', "]",
        "[train]", "batch_size = 8", "steps = 1"])
    session = bitgrad.Session(bitgrad.parse_config(toml))
    mine = bitgrad.nn.from_layers(layers, [1, 2, 6, 6], seed=5)
    theirs = dict(session.named_parameters())
    ours = dict(mine.named_parameters())
    assert sorted(ours) == sorted(theirs)
    for name, t in ours.items():
        assert _bits(t) == _bits(theirs[name]), name
