"""Gradient accumulation from Python (contract T5; numerics.md §18): bitgrad.accumulate and
bitgrad.Accumulator combine the micro-batches' gradients on the canonical tree, so 2, 4 and 8
micro-batches of a power-of-two number of 32-sample blocks give the bits of the whole batch — the
gradient of every parameter and the loss — on an MLP (with dropout keyed by row), a CNN and a
regression; `.grad +=` (backward after backward) does not in general, while the pairwise
combination of bitgrad.grad does; other splits give the tree over micro-batches, or an error
with strict=True."""
import numpy as np
import pytest

import bitgrad as bg
from bitgrad import nn

B = 256


def mlp():
    return nn.Sequential(nn.Linear(12, 24), nn.Tanh(), nn.Dropout(0.2, layer_id=0), nn.Linear(24, 5), seed=3)


def cnn():
    # a Sequential for now; a Python nn.Module subclass slots in the same way
    return nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Dropout(0.1, layer_id=0),
                         nn.Linear(4 * 4 * 4, 5), seed=4)


MODELS = {"mlp": (mlp, [12]), "cnn": (cnn, [1, 8, 8])}


def batch(shape, n, classes=5, targets=1, seed=1):
    ds = bg.data.synthetic(n, shape, classes=classes, targets=targets, seed=seed)
    b = bg.data.DataLoader(ds, n, shuffle=False).next()
    return b.x, b.y


def ctx(row):
    return nn.Context(training=True, seed=5, step=2, row_offset=row)


def grads(model):
    return [None if p.grad is None else bg.fingerprint(p.grad) for p in model.parameters()]


def whole_batch(model, X, Y):
    model.zero_grad()
    loss = bg.cross_entropy(model(X, ctx(0)), Y)   # the mean over the whole batch, one forward and backward
    loss.backward()
    return loss.item(), grads(model)


def split(X, Y, sizes):
    out, r = [], 0
    for s in sizes:
        out.append((X[r:r + s], Y[r:r + s]))
        r += s
    return out


def xent_sum(model):
    return lambda x, y, row: bg.cross_entropy(model(x, ctx(row)), y, reduction="sum")


@pytest.mark.parametrize("name", sorted(MODELS))
@pytest.mark.parametrize("k", [2, 4, 8])
def test_micro_batches_give_the_bits_of_the_whole_batch(name, k):
    make, shape = MODELS[name]
    X, Y = batch(shape, B)
    model = make()
    want_loss, want = whole_batch(model, X, Y)
    model.zero_grad()
    loss = bg.accumulate(model, split(X, Y, [B // k] * k), xent_sum(model))
    assert loss.item() == want_loss
    assert grads(model) == want


@pytest.mark.parametrize("k", [2, 4, 8])
def test_regression_with_several_targets_per_sample(k):
    # mse over [N, 3] targets: the divisor is N * 3, what the mean divides by
    model = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 3), seed=7)
    X, Y = batch([6], B, classes=0, targets=3)
    loss = bg.mse_loss(model(X), Y)
    loss.backward()
    want, want_loss = grads(model), loss.item()
    model.zero_grad()
    got = bg.accumulate(model, split(X, Y, [B // k] * k), lambda x, y, row: bg.mse_loss(model(x), y, reduction="sum"))
    assert got.item() == want_loss
    assert grads(model) == want


def test_accumulator_with_a_short_last_micro_batch():
    # 232 samples in micro-batches of 64: the last, of 40, holds the tail of the batch's tree
    X, Y = batch([12], 232)
    model = mlp()
    want_loss, want = whole_batch(model, X, Y)
    model.zero_grad()
    acc = bg.Accumulator(model, divisor=232)
    for x, y in split(X, Y, [64, 64, 64, 40]):
        acc.backward(bg.cross_entropy(model(x, ctx(acc.row_offset)), y, reduction="sum"), x.shape[0])
    loss = acc.finish()
    assert acc.whole_batch is True
    assert loss.item() == want_loss and grads(model) == want


def test_grad_plus_equals_is_not_the_whole_batch():
    """backward after backward adds into .grad in sequence, ((g0 + g1) + g2) + g3: another order than
    the batch's tree, so other bits (two micro-batches happen to match: g0 + g1 is the tree). The
    same gradients combined pairwise, (g0 + g1) + (g2 + g3), are the whole batch's again."""
    for name in sorted(MODELS):
        make, shape = MODELS[name]
        X, Y = batch(shape, B)
        model = make()
        _, want = whole_batch(model, X, Y)
        params = model.parameters()
        for k in (2, 4, 8):
            model.zero_grad()
            for j, (x, y) in enumerate(split(X, Y, [B // k] * k)):
                loss = bg.cross_entropy(model(x, ctx(j * B // k)), y, reduction="sum") / B
                loss.backward()                        # .grad += this micro-batch's gradient
            sequential = grads(model)
            if k == 2:
                assert sequential == want, name
            else:
                assert sequential != want, (name, k)
        # bitgrad.grad per micro-batch, combined pairwise by hand: the tree again
        model.zero_grad()
        g = [bg.grad(bg.cross_entropy(model(x, ctx(j * 64)), y, reduction="sum") / B, params)
             for j, (x, y) in enumerate(split(X, Y, [64] * 4))]
        tree = [(a + b) + (c + d) for a, b, c, d in zip(*g)]
        assert [bg.fingerprint(t) for t in tree] == want, name


def test_other_splits_use_the_tree_over_micro_batches():
    # micro-batches of 48 samples are not whole blocks: the tree over micro-batches (what `bitgrad
    # train --accumulate 4` computes for a batch of 192), not the whole batch's bits
    X, Y = batch([12], 192)
    model = mlp()
    params = model.parameters()
    parts = split(X, Y, [48] * 4)
    g = [bg.grad(bg.cross_entropy(model(x, ctx(48 * j)), y, reduction="sum") / 192, params) for j, (x, y) in enumerate(parts)]
    tree = [bg.fingerprint((a + b) + (c + d)) for a, b, c, d in zip(*g)]
    acc = bg.Accumulator(model, 192)
    for j, (x, y) in enumerate(parts):
        acc.backward(bg.cross_entropy(model(x, ctx(acc.row_offset)), y, reduction="sum"), 48)
    acc.finish()
    assert acc.whole_batch is False
    assert grads(model) == tree
    model.zero_grad()
    with pytest.raises(bg.InputError, match="not each a power-of-two number of 32-sample blocks"):
        bg.accumulate(model, parts, xent_sum(model), strict=True)
    assert all(p.grad is None for p in params)   # refused, and nothing left in .grad


def test_a_gradient_left_from_before_is_refused():
    X, Y = batch([12], 64)
    model = mlp()
    bg.cross_entropy(model(X), Y).backward()
    with pytest.raises(bg.InputError, match=r"already holds a gradient .*zero_grad"):
        bg.accumulate(model, split(X, Y, [32, 32]), xent_sum(model))


def test_parameters_as_pairs_or_tensors_and_bad_arguments():
    X, Y = batch([12], 128)
    model = mlp()
    want_loss, want = whole_batch(model, X, Y)
    for params in (model.named_parameters(), model.parameters()):
        model.zero_grad()
        assert bg.accumulate(params, split(X, Y, [64, 64]), xent_sum(model)).item() == want_loss
        assert grads(model) == want
    with pytest.raises(TypeError, match="micro-batch is an"):
        bg.accumulate(model, [X], xent_sum(model))
    with pytest.raises(bg.InputError, match="no micro-batches"):
        bg.accumulate(model, [], xent_sum(model))
    with pytest.raises(bg.InputError, match="divisor"):
        bg.Accumulator(model, 0)


def test_batch_norm_is_refused_and_frozen_parameters_take_no_part():
    X, Y = batch([12], 64)
    bn = nn.Sequential(nn.Linear(12, 8), nn.BatchNorm1d(8), nn.Linear(8, 5), seed=1)
    with pytest.raises(bg.InputError, match="batch-norm layer is not supported"):
        bg.accumulate(bn, split(X, Y, [32, 32]), xent_sum(bn))
    model = mlp()
    frozen = model.parameters()[0]
    frozen.requires_grad = False
    _, want = whole_batch(model, X, Y)
    model.zero_grad()
    bg.accumulate(model, split(X, Y, [32, 32]), xent_sum(model))
    assert frozen.grad is None and grads(model) == want


def test_accumulator_refuses_batch_statistics_and_keeps_running_ones():
    # Accumulator (the loop form) refuses a batch-norm model in training mode at its second
    # micro-batch, as accumulate does; in evaluation mode the running statistics are the same for
    # any split, and the bits are the whole batch's
    X, Y = batch([12], 64)
    bn = nn.Sequential(nn.Linear(12, 8), nn.BatchNorm1d(8), nn.Linear(8, 5), seed=1)
    acc = bg.Accumulator(bn, 64)
    acc.backward(bg.cross_entropy(bn(X[:32]), Y[:32], reduction="sum"), 32)
    with pytest.raises(bg.InputError, match=r"Accumulator: a second micro-batch with a batch-norm layer .* in training mode"):
        acc.backward(bg.cross_entropy(bn(X[32:]), Y[32:], reduction="sum"), 32)
    bn.eval()
    bn.zero_grad()
    whole = bg.cross_entropy(bn(X), Y)
    whole.backward()
    want = grads(bn)
    bn.zero_grad()
    acc = bg.Accumulator(bn, 64)
    for x, y in split(X, Y, [32, 32]):
        acc.backward(bg.cross_entropy(bn(x), y, reduction="sum"), 32)
    assert acc.finish().item() == whole.item() and acc.whole_batch and grads(bn) == want


def test_an_onnx_graph_with_batch_normalization_is_refused_as_a_batch_norm_layer(tmp_path):
    # the CLI refuses it with --accumulate; accumulate took it and gave other gradients
    torch = pytest.importorskip("torch")
    pytest.importorskip("onnx")
    import warnings
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(12, 8), torch.nn.BatchNorm1d(8), torch.nn.ReLU(), torch.nn.Linear(8, 5)).train()
    path = str(tmp_path / "bn.onnx")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(m, torch.randn(4, 12), path, opset_version=17, training=torch.onnx.TrainingMode.TRAINING,
                          do_constant_folding=False, input_names=["input"], output_names=["output"], dynamic_axes={"input": {0: "batch"}})
    g = bg.onnx.load(path)
    assert g.training_semantics and g.runs_op("BatchNormalization") and not g.runs_op("Conv")
    X, Y = batch([12], 64)
    with pytest.raises(bg.InputError, match="ONNX graph's BatchNormalization"):
        bg.accumulate(g, split(X, Y, [32, 32]), lambda x, y, row: bg.cross_entropy(g(x), y, reduction="sum"))
    g.eval()  # the running statistics: accepted
    bg.accumulate(g, split(X, Y, [32, 32]), lambda x, y, row: bg.cross_entropy(g(x), y, reduction="sum"))


def _sequence_model(seq_first):
    """A Linear over windows [N, T, 6] -> [N, T, 4], applied batch-first or, as torch's
    sequence-first habit, to x.transpose(0, 1) ([T, N, 6]) and transposed back."""
    lin = nn.Linear(6, 4, seed=2)

    def forward(x):
        return lin(x.transpose(0, 1)).transpose(0, 1) if seq_first else lin(x)
    return lin, forward


@pytest.mark.parametrize("seq_first", [False, True])
def test_a_layer_run_sequence_first_is_not_reported_as_the_whole_batch(seq_first):
    # the Linear's weight gradient sums per time step over the batch when the samples sit
    # on axis 1; micro-batches then change its bits, and the accumulator said whole_batch=True
    rng = np.random.default_rng(4)
    X = bg.tensor(rng.standard_normal((64, 10, 6)).astype(np.float32))
    Y = bg.tensor(rng.standard_normal((64, 10, 4)).astype(np.float32))
    lin, forward = _sequence_model(seq_first)

    def loss_fn(x, y, row):
        return bg.mse_loss(forward(x), y, reduction="sum")

    def grads():
        return [np.array(p.grad).tobytes() for p in lin.parameters()]

    lin.zero_grad()
    (loss_fn(X, Y, 0) / (64 * 40)).backward()  # the whole batch in one forward and backward
    whole = grads()
    lin.zero_grad()
    acc = bg.Accumulator(lin, 64 * 40)
    for k in (0, 32):
        acc.backward(loss_fn(X[k:k + 32], Y[k:k + 32], k), 32)
    acc.finish()
    assert acc.whole_batch is (not seq_first)
    assert (grads() == whole) is (not seq_first)  # what whole_batch says is what happened
    lin.zero_grad()
    if seq_first:
        with pytest.raises(bg.InputError, match=r"linear's weight gradient summed 10 leading entries of \[10, 32, 6\] as samples"):
            bg.accumulate(lin, [(X[:32], Y[:32]), (X[32:], Y[32:])], loss_fn, strict=True)
    else:
        bg.accumulate(lin, [(X[:32], Y[:32]), (X[32:], Y[32:])], loss_fn, strict=True)
        assert grads() == whole
