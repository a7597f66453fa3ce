"""Randomness without traps. The three traps of the trial are impossible or an
error; unkeyed draws come from the program's generator (bitgrad.manual_seed), whose state is
saved and restored; explicit seed= and layer_id= keep their meaning."""
import pytest

import bitgrad as bg
from bitgrad import nn


def fp(x):
    return bg.fingerprint(x)


def test_trap1_two_unseeded_layers_start_different():
    bg.manual_seed(0)
    a, b = nn.Linear(5, 4), nn.Linear(5, 4)
    assert fp(a) != fp(b)
    c, d = nn.Conv2d(2, 3, 3), nn.Conv2d(2, 3, 3)
    assert fp(c) != fp(d)
    e, f = nn.LSTM(3, 4), nn.LSTM(3, 4)
    assert fp(e) != fp(f)
    # the same program gives the same layers; another seed others
    bg.manual_seed(0)
    assert fp(nn.Linear(5, 4)) == fp(a) and fp(nn.Linear(5, 4)) == fp(b)
    bg.manual_seed(1)
    assert fp(nn.Linear(5, 4)) != fp(a)


def test_explicit_seeds_keep_their_meaning():
    bg.manual_seed(123)
    a = nn.Linear(5, 4, seed=0)
    bg.manual_seed(456)
    b = nn.Linear(5, 4, seed=0)
    assert fp(a) == fp(b)                      # seed= is the layer's own, whatever the program's
    same = nn.Linear(5, 4)
    ref = nn.Linear(5, 4, seed=0)
    ref.init(0)                                 # Module.init(seed) is what seed= did before
    assert fp(ref) == fp(a) and fp(same) != fp(a)
    # a Sequential with a seed initialises the whole model as the CLI does (unchanged)
    s1 = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2), seed=9)
    bg.manual_seed(77)
    s2 = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2), seed=9)
    assert fp(s1) == fp(s2)


def test_trap2_two_dropouts_never_share_masks():
    bg.manual_seed(0)
    d1, d2 = nn.Dropout(0.5), nn.Dropout(0.5)
    assert d1.layer_id != d2.layer_id and d1.layer_id >= 2**63
    ctx = nn.Context(training=True, seed=3, step=1)
    x = bg.ones(4, 16)
    assert fp(d1(x, ctx)) != fp(d2(x, ctx))
    # in a Sequential, without ids, no error: they differ
    nn.Sequential(nn.Dropout(0.1), nn.Linear(2, 2), nn.Dropout(0.2))
    # explicit ids keep their meaning, and equal explicit ids stay refused in a Sequential
    assert fp(nn.Dropout(0.5, layer_id=0)(x, ctx)) == fp(nn.Dropout(0.5, layer_id=0)(x, ctx))
    with pytest.raises(bg.InputError, match="two Dropout layers have layer_id 0"):
        nn.Sequential(nn.Dropout(0.1, layer_id=0), nn.Dropout(0.2, layer_id=0))
    # two transformer blocks made without ids draw different attention masks too
    b1, b2 = nn.TransformerBlock(8, 2, dropout=0.5, seed=1), nn.TransformerBlock(8, 2, dropout=0.5, seed=1)
    t = bg.randn(1, 3, 8, seed=2)
    assert fp(b1(t, ctx)) != fp(b2(t, ctx))


def test_trap3_functional_dropout():
    bg.manual_seed(0)
    x = bg.ones(64)
    # without a key: a new mask each call, from the generator (reproducible)
    m1, m2 = bg.dropout(x, 0.5), bg.dropout(x, 0.5)
    assert fp(m1) != fp(m2)
    bg.manual_seed(0)
    assert fp(bg.dropout(x, 0.5)) == fp(m1) and fp(bg.dropout(x, 0.5)) == fp(m2)
    # seed= alone a second time would repeat the mask: an error
    bg.dropout(x, 0.5, seed=1)
    with pytest.raises(bg.InputError, match="seed=1 without stream= was used before"):
        bg.dropout(x, 0.5, seed=1)
    # with a stream (the step) the key changes per step; the same key is the same mask (pure)
    a = bg.dropout(x, 0.5, seed=1, stream=7)
    assert fp(a) == fp(bg.dropout(x, 0.5, seed=1, stream=7)) != fp(bg.dropout(x, 0.5, seed=1, stream=8))
    # the first use of seed= alone gives what it always gave
    bg.manual_seed(5)
    old = bg.dropout(bg.ones(6), 0.5, seed=1)
    assert old.tolist() == [2, 2, 0, 0, 0, 2]
    # evaluation
    assert fp(bg.dropout(x, 0.5, training=False)) == fp(x)
    with pytest.raises(bg.InputError, match="stream= keys a mask with seed="):
        bg.dropout(x, 0.5, stream=3)


def test_rng_state_save_and_restore_continues_the_draws():
    bg.manual_seed(42)
    nn.Linear(2, 2)
    bg.dropout(bg.ones(8), 0.5)
    state = bg.get_rng_state()
    after = [fp(bg.dropout(bg.ones(8), 0.5)), fp(bg.randn(3)), fp(nn.Linear(2, 2)), fp(nn.Dropout(0.5)(bg.ones(4, 4), nn.Context(training=True)))]
    bg.manual_seed(999)
    bg.set_rng_state(state)
    again = [fp(bg.dropout(bg.ones(8), 0.5)), fp(bg.randn(3)), fp(nn.Linear(2, 2)), fp(nn.Dropout(0.5)(bg.ones(4, 4), nn.Context(training=True)))]
    assert after == again
    assert state == {"seed": 42, "modules": 1, "dropouts": 0, "steps": 0, "draws": 1}
    with pytest.raises(ValueError, match="unknown key 'x'"):
        bg.set_rng_state({"x": 1})


def test_unseeded_factories_draw_from_the_generator():
    bg.manual_seed(3)
    a, b = bg.randn(5), bg.randn(5)
    assert fp(a) != fp(b)
    bg.manual_seed(3)
    assert fp(bg.randn(5)) == fp(a)
    assert fp(bg.randn(5, seed=1)) == fp(bg.randn(5, seed=1))          # keyed: unchanged
    assert fp(bg.rand_like(a)) != fp(bg.rand_like(a))
    assert bg.initial_seed() == 3


def test_training_forward_steps_are_part_of_the_state():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.drop = nn.Dropout(0.5)

        def forward(self, x):
            return self.drop(x)

    bg.manual_seed(8)
    net = Net()
    x = bg.ones(2, 32)
    first = fp(net(x))
    state = bg.get_rng_state()
    second = fp(net(x))
    assert first != second
    bg.set_rng_state(state)
    assert fp(net(x)) == second


def test_a_python_loop_resumed_from_a_checkpoint_gives_the_uninterrupted_bits(tmp_path):
    """T7 for a Python loop: the checkpoint holds the model's state_dict, the optimizer's state and
    the generator's state (automatic steps and functional draws continue where they were)."""
    import json

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(6, 16)
            self.drop = nn.Dropout(0.3)
            self.fc2 = nn.Linear(16, 2)

        def forward(self, x):
            h = self.drop(bg.relu(self.fc1(x)))
            return self.fc2(bg.dropout(h, 0.2))          # a functional draw too

    def steps(model, opt, first, last):
        for s in range(first, last):
            x, y = bg.randn(8, 6, seed=1, stream=s), bg.randn(8, 2, seed=2, stream=s)
            opt.zero_grad()
            bg.mse_loss(model(x), y).backward()
            opt.step()

    def fresh():
        bg.manual_seed(21)
        model = Net()
        return model, bg.optim.Adam(model, lr=0.01)

    model, opt = fresh()
    steps(model, opt, 0, 6)
    want = fp(model)

    model, opt = fresh()
    steps(model, opt, 0, 3)
    path = str(tmp_path / "ckpt.safetensors")
    tensors = {"model." + k: v for k, v in model.state_dict().items()}
    tensors.update({"optim." + k: v for k, v in opt.state_dict().items() if isinstance(v, bg.Tensor)})
    bg.io.save_safetensors(path, tensors, {"rng": json.dumps(bg.get_rng_state()), "steps": str(opt.steps)})

    model, opt = fresh()                                   # a new process would start here
    bg.manual_seed(0)                                      # whatever ran before
    bg.dropout(bg.ones(4), 0.5)
    loaded, meta = bg.io.load_safetensors(path, require_checksum=True)
    model.load_state_dict({k[6:]: v for k, v in loaded.items() if k.startswith("model.")})
    state = {k[6:]: v for k, v in loaded.items() if k.startswith("optim.")}
    state["steps"] = int(meta["steps"])
    opt.load_state_dict(state)
    bg.set_rng_state(json.loads(meta["rng"]))
    steps(model, opt, 3, 6)
    assert fp(model) == want


class _Twice(nn.Module):
    # one Dropout module called twice in a forward (per time step of a loop, say), as PyTorch allows
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(16, 16, seed=1)
        self.drop = nn.Dropout(0.5, layer_id=4)

    def forward(self, x):
        return self.drop(self.lin(self.drop(x)))


def test_a_dropout_module_called_twice_draws_two_masks():
    # PyTorch draws a new mask at every call; bitgrad keys the call's index in the forward, so the
    # first call keeps the mask a single call draws, and a run repeats its bits
    x = bg.ones(8, 16)
    ctx = dict(step=3, row_offset=0, seed=11)
    m = _Twice()
    with nn.context(**ctx):
        first = m.drop(x)
        second = m.drop(x)
    with nn.context(**ctx):
        alone = m.drop(x)
    assert fp(first) == fp(alone) and fp(first) != fp(second)
    with nn.context(**ctx):
        y1 = m(x)
    with nn.context(**ctx):
        y2 = m(x)
    assert fp(y1) == fp(y2)


class _Functional(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(12, 24, seed=2)
        self.b = nn.Linear(24, 5, seed=3)

    def forward(self, x):
        h = bg.dropout(self.a(x).tanh(), 0.3, training=self.training)  # functional, no key: the forward's
        return self.b(bg.dropout(h, 0.2, training=self.training))


@pytest.mark.parametrize("model", [_Functional, _Twice])
def test_micro_batches_draw_the_whole_batchs_masks(model):
    # functional dropout and a module called twice keep contract T5 under accumulate: each
    # micro-batch's forward at its row offset draws the rows of the whole batch's masks
    m = model()
    width = 12 if model is _Functional else 16
    classes = 5 if model is _Functional else 16
    ds = bg.data.synthetic(128, [width], classes=classes, seed=4)
    b = bg.data.DataLoader(ds, 128, shuffle=False).next()
    X, Y = b.x, b.y
    with nn.context(step=2, row_offset=0, seed=9):
        whole = bg.cross_entropy(m(X), Y)
    whole.backward()
    want = [fp(p.grad) for p in m.parameters()]
    m.zero_grad()

    def loss(x, y, row):
        with nn.context(step=2, row_offset=row, seed=9):
            return bg.cross_entropy(m(x), y, reduction="sum")

    got = bg.accumulate(m, [(X[i:i + 32], Y[i:i + 32]) for i in range(0, 128, 32)], loss)
    assert got.item() == whole.item() and [fp(p.grad) for p in m.parameters()] == want


def test_recomputation_replays_the_calls():
    # bg.checkpoint runs the function again in the backward: the same call indices, the same masks
    m = _Twice()
    x = bg.randn(8, 16, seed=3)

    def grads(recompute):
        m.zero_grad()
        with nn.context(step=1, row_offset=0, seed=5):
            h = m.drop(x)  # a call before the checkpointed part: its calls continue from here
            y = bg.checkpoint(lambda t: m.drop(m.lin(m.drop(t))), h, m) if recompute else m.drop(m.lin(m.drop(h)))
        y.sum().backward()
        return [fp(p.grad) for p in m.parameters()]

    assert grads(True) == grads(False)


def test_a_transformer_block_or_graph_called_twice_draws_two_masks():
    # the call index keys the attention and MLP dropouts of a block as it keys nn.Dropout
    blk = nn.TransformerBlock(8, 2, dropout=0.5, seed=1)
    t = bg.randn(1, 3, 8, seed=2)
    with nn.context(step=1, row_offset=0, seed=3):
        a, b = blk(t), blk(t)
    with nn.context(step=1, row_offset=0, seed=3):
        c = blk(t)
    assert fp(a) == fp(c) and fp(a) != fp(b)
