"""The recurrent and normalisation modules of issue 29 against PyTorch's with the same weights:
bitgrad.nn.RNN / LSTM / GRU (PyTorch's parameter names, copied into torch.nn.RNN / LSTM / GRU),
GroupNorm, InstanceNorm, RMSNorm (written out: torch 1.13 has none). Outputs, final states and
every parameter's and the input's gradient, in float32 (bitgrad's modules hold f32 parameters),
within rtol 1e-5 and atol 1e-5 times the largest magnitude (sums in other orders: numerics §33, §34)."""
import numpy as np
import pytest
import torch

import bitgrad as bg

RTOL, ATOL = 1e-5, 1e-5


def _close(what, a, e):
    a, e = np.asarray(a, dtype=np.float64), np.asarray(e, dtype=np.float64)
    assert a.shape == e.shape, "%s: shapes %s vs %s" % (what, a.shape, e.shape)
    scale = max(1.0, float(np.max(np.abs(e))) if e.size else 1.0)
    np.testing.assert_allclose(a, e, rtol=RTOL, atol=ATOL * scale, err_msg=what)


def _copy_into_torch(m_bg, m_th):
    state = {k: torch.from_numpy(v.detach().numpy().copy()) for k, v in m_bg.state_dict().items()}
    m_th.load_state_dict(state, strict=True)


def _grads(m_bg, m_th):
    th = dict(m_th.named_parameters())
    for name, p in m_bg.named_parameters():
        _close("grad " + name, p.grad.detach().numpy(), th[name].grad.detach().numpy())


def _ids(v):
    return "-".join(str(x) for x in v)


RECURRENT = [
    # kind, layers, batch_first, bias, with initial states, nonlinearity
    ("LSTM", 1, False, True, False, None),
    ("LSTM", 2, True, True, True, None),
    ("GRU", 1, True, True, True, None),
    ("GRU", 2, False, False, False, None),
    ("RNN", 2, True, True, True, "tanh"),
    ("RNN", 1, False, True, False, "relu"),
]


@pytest.mark.parametrize("kind,layers,batch_first,bias,states,nl", RECURRENT, ids=[_ids(r) for r in RECURRENT])
def test_recurrent_matches_torch(kind, layers, batch_first, bias, states, nl):
    rng = np.random.RandomState(10 * layers + len(kind) + int(batch_first))
    N, T, I, H = 3, 5, 4, 6
    kw = dict(num_layers=layers, bias=bias, batch_first=batch_first)
    if nl:
        kw["nonlinearity"] = nl
    m_bg = getattr(bg.nn, kind)(I, H, seed=3, **kw)
    m_th = getattr(torch.nn, kind)(I, H, **kw)
    assert [n for n, _ in m_bg.named_parameters()] == [n for n, _ in m_th.named_parameters()]
    _copy_into_torch(m_bg, m_th)
    x = rng.standard_normal((N, T, I) if batch_first else (T, N, I)).astype(np.float32)
    h0 = rng.standard_normal((layers, N, H)).astype(np.float32)
    c0 = rng.standard_normal((layers, N, H)).astype(np.float32)
    xb, xt = bg.from_numpy(x), torch.from_numpy(x).requires_grad_(True)
    xb.requires_grad = True
    if states:
        hb, ht = bg.from_numpy(h0), torch.from_numpy(h0).requires_grad_(True)
        hb.requires_grad = True
        if kind == "LSTM":
            cb, ct = bg.from_numpy(c0), torch.from_numpy(c0).requires_grad_(True)
            cb.requires_grad = True
            out_b, (hn_b, cn_b) = m_bg.run(xb, hb, cb)
            out_t, (hn_t, cn_t) = m_th(xt, (ht, ct))
        else:
            out_b, hn_b = m_bg.run(xb, hb)
            out_t, hn_t = m_th(xt, ht)
    else:
        if kind == "LSTM":
            out_b, (hn_b, cn_b) = m_bg.run(xb)
            out_t, (hn_t, cn_t) = m_th(xt)
        else:
            out_b, hn_b = m_bg.run(xb)
            out_t, hn_t = m_th(xt)
    _close("output", out_b.detach().numpy(), out_t.detach().numpy())
    _close("h_n", hn_b.detach().numpy(), hn_t.detach().numpy())
    if kind == "LSTM":
        _close("c_n", cn_b.detach().numpy(), cn_t.detach().numpy())
    # a loss of every output: sum(output * g1) + sum(h_n * g2) (+ sum(c_n * g3))
    g1 = rng.standard_normal(out_t.shape).astype(np.float32)
    g2 = rng.standard_normal(hn_t.shape).astype(np.float32)
    loss_b = bg.sum(out_b * bg.from_numpy(g1)) + bg.sum(hn_b * bg.from_numpy(g2))
    loss_t = (out_t * torch.from_numpy(g1)).sum() + (hn_t * torch.from_numpy(g2)).sum()
    if kind == "LSTM":
        g3 = rng.standard_normal(cn_t.shape).astype(np.float32)
        loss_b = loss_b + bg.sum(cn_b * bg.from_numpy(g3))
        loss_t = loss_t + (cn_t * torch.from_numpy(g3)).sum()
    _close("loss", loss_b.detach().numpy(), loss_t.detach().numpy())
    loss_b.backward()
    loss_t.backward()
    _grads(m_bg, m_th)
    _close("grad x", xb.grad.detach().numpy(), xt.grad.detach().numpy())
    if states:
        _close("grad h0", hb.grad.detach().numpy(), ht.grad.detach().numpy())
        if kind == "LSTM":
            _close("grad c0", cb.grad.detach().numpy(), ct.grad.detach().numpy())


def test_recurrent_last_only_and_initialisation():
    m = bg.nn.LSTM(3, 4, batch_first=True, last_only=True, seed=1)
    x = bg.from_numpy(np.random.RandomState(0).standard_normal((2, 5, 3)).astype(np.float32))
    out, (hn, _) = m.run(x)
    np.testing.assert_array_equal(m(x).detach().numpy(), out.detach().numpy()[:, -1, :])
    np.testing.assert_array_equal(m(x).detach().numpy(), hn.detach().numpy()[0])
    bound = 1 / np.sqrt(4)
    for name, p in m.named_parameters():
        assert np.all(np.abs(p.detach().numpy()) <= bound), name
    again = bg.nn.LSTM(3, 4, batch_first=True, last_only=True, seed=1)
    for (n1, p1), (n2, p2) in zip(m.named_parameters(), again.named_parameters()):
        np.testing.assert_array_equal(p1.detach().numpy(), p2.detach().numpy())


def _copy_into_torch_named(m_bg, m_th):
    # state_dict has PyTorch's keys (issue 30): the norms' gamma and beta are weight and bias there
    state = {k: torch.from_numpy(v.detach().numpy().copy()) for k, v in m_bg.state_dict().items()}
    m_th.load_state_dict(state, strict=True)


@pytest.mark.parametrize("kind", ["GroupNorm", "InstanceNorm"])
def test_norm_modules_match_torch(kind):
    rng = np.random.RandomState(7)
    x = rng.standard_normal((4, 6, 5, 3)).astype(np.float32) * 2 + 1
    if kind == "GroupNorm":
        m_bg, m_th = bg.nn.GroupNorm(3, 6), torch.nn.GroupNorm(3, 6)
    else:
        m_bg, m_th = bg.nn.InstanceNorm(6, affine=True), torch.nn.InstanceNorm2d(6, affine=True)
    g = [bg.from_numpy(rng.standard_normal(6).astype(np.float32)), bg.from_numpy(rng.standard_normal(6).astype(np.float32))]
    m_bg.load_state_dict({"weight": g[0], "bias": g[1]})
    _copy_into_torch_named(m_bg, m_th)
    xb, xt = bg.from_numpy(x), torch.from_numpy(x).requires_grad_(True)
    xb.requires_grad = True
    yb, yt = m_bg(xb), m_th(xt)
    _close("y", yb.detach().numpy(), yt.detach().numpy())
    w = rng.standard_normal(x.shape).astype(np.float32)
    bg.sum(yb * bg.from_numpy(w)).backward()
    (yt * torch.from_numpy(w)).sum().backward()
    _close("grad x", xb.grad.detach().numpy(), xt.grad.detach().numpy())
    _close("grad weight", m_bg.weight.grad.detach().numpy(), m_th.weight.grad.detach().numpy())
    _close("grad bias", m_bg.bias.grad.detach().numpy(), m_th.bias.grad.detach().numpy())


def test_rmsnorm_module():
    rng = np.random.RandomState(8)
    x = rng.standard_normal((3, 4, 8)).astype(np.float32)
    m = bg.nn.RMSNorm(8, eps=1e-6)
    y = m(bg.from_numpy(x)).detach().numpy()
    xt = torch.from_numpy(x)
    want = xt * torch.rsqrt(xt.pow(2).mean(-1, keepdim=True) + 1e-6)
    _close("y", y, want.detach().numpy())
    assert [n for n, _ in m.named_parameters()] == ["gamma"]
    assert bg.nn.RMSNorm([4, 8], elementwise_affine=False).parameters() == []
