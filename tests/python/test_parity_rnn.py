"""The recurrent and normalisation modules against PyTorch's with the same weights:
bitgrad.nn.RNN / LSTM / GRU (PyTorch's parameter names, copied into torch.nn.RNN / LSTM / GRU),
GroupNorm, InstanceNorm, RMSNorm (written out: torch 1.13 has none). Outputs, final states and
every parameter's and the input's gradient, in float32 (bitgrad's modules hold f32 parameters).

Both libraries are compared with torch's module in float64 on the same float32 values (the exact
value for float32 purposes; parity_bounds.py): bitgrad's error <= max(gamma(n) * S, K_TORCH *
torch's error), S the reference's largest magnitude, n the number of values the results are made
of (inputs, states, parameters, upstream gradients) plus 16 roundings of elementwise functions
per cell step: no result combines more terms (sums in other orders: numerics §33, §34)."""
import copy

import numpy as np
import pytest
import torch

import bitgrad as bg
import parity_bounds as pb


def _close(what, a, e, r, n):
    """bitgrad's a and torch's e (float32) against the float64 reference r; n as in the docstring"""
    a, e, r = (np.asarray(v, dtype=np.float64) for v in (a, e, r))
    assert a.shape == e.shape, "%s: shapes %s vs %s" % (what, a.shape, e.shape)
    pb.check_vs_reference(what, a, e, r, pb.gamma(n, pb.U32) * pb.scale(r))


def _copy_into_torch(m_bg, m_th):
    state = {k: torch.from_numpy(v.detach().numpy().copy()) for k, v in m_bg.state_dict().items()}
    m_th.load_state_dict(state, strict=True)


def _grads(m_bg, m_th, m_ref, n):
    th, ref = dict(m_th.named_parameters()), dict(m_ref.named_parameters())
    for name, p in m_bg.named_parameters():
        _close("grad " + name, p.grad.detach().numpy(), th[name].grad.detach().numpy(), ref[name].grad.detach().numpy(), n)


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


def _both(t):
    """a float32 array as (torch float32 leaf, torch float64 leaf), both requiring grad"""
    return torch.from_numpy(t.copy()).requires_grad_(True), torch.from_numpy(t.astype(np.float64)).requires_grad_(True)


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
    m_ref = copy.deepcopy(m_th).double()
    x = rng.standard_normal((N, T, I) if batch_first else (T, N, I)).astype(np.float32)
    h0 = rng.standard_normal((layers, N, H)).astype(np.float32)
    c0 = rng.standard_normal((layers, N, H)).astype(np.float32)
    xb, (xt, xr) = bg.from_numpy(x), _both(x)
    xb.requires_grad = True
    if states:
        hb, (ht, hr) = bg.from_numpy(h0), _both(h0)
        hb.requires_grad = True
        if kind == "LSTM":
            cb, (ct, cr) = bg.from_numpy(c0), _both(c0)
            cb.requires_grad = True
            out_b, (hn_b, cn_b) = m_bg.run(xb, hb, cb)
            out_t, (hn_t, cn_t) = m_th(xt, (ht, ct))
            out_r, (hn_r, cn_r) = m_ref(xr, (hr, cr))
        else:
            out_b, hn_b = m_bg.run(xb, hb)
            out_t, hn_t = m_th(xt, ht)
            out_r, hn_r = m_ref(xr, hr)
    else:
        if kind == "LSTM":
            out_b, (hn_b, cn_b) = m_bg.run(xb)
            out_t, (hn_t, cn_t) = m_th(xt)
            out_r, (hn_r, cn_r) = m_ref(xr)
        else:
            out_b, hn_b = m_bg.run(xb)
            out_t, hn_t = m_th(xt)
            out_r, hn_r = m_ref(xr)
    # the values of the case: input, states, parameters, the upstream gradients (as many as the
    # outputs), and 16 elementwise roundings per cell step
    n_params = sum(p.numel() for p in m_th.parameters())
    n_out = out_t.numel() + hn_t.numel() * (2 if kind == "LSTM" else 1)
    n = x.size + (h0.size + (c0.size if kind == "LSTM" else 0) if states else 0) + n_params + n_out + 16 * T * layers
    _close("output", out_b.detach().numpy(), out_t.detach().numpy(), out_r.detach().numpy(), n)
    _close("h_n", hn_b.detach().numpy(), hn_t.detach().numpy(), hn_r.detach().numpy(), n)
    if kind == "LSTM":
        _close("c_n", cn_b.detach().numpy(), cn_t.detach().numpy(), cn_r.detach().numpy(), n)
    # a loss of every output: sum(output * g1) + sum(h_n * g2) (+ sum(c_n * g3))
    g1 = rng.standard_normal(out_t.shape).astype(np.float32)
    g2 = rng.standard_normal(hn_t.shape).astype(np.float32)
    loss_b = bg.sum(out_b * bg.from_numpy(g1)) + bg.sum(hn_b * bg.from_numpy(g2))
    loss_t = (out_t * torch.from_numpy(g1)).sum() + (hn_t * torch.from_numpy(g2)).sum()
    loss_r = (out_r * torch.from_numpy(g1.astype(np.float64))).sum() + (hn_r * torch.from_numpy(g2.astype(np.float64))).sum()
    if kind == "LSTM":
        g3 = rng.standard_normal(cn_t.shape).astype(np.float32)
        loss_b = loss_b + bg.sum(cn_b * bg.from_numpy(g3))
        loss_t = loss_t + (cn_t * torch.from_numpy(g3)).sum()
        loss_r = loss_r + (cn_r * torch.from_numpy(g3.astype(np.float64))).sum()
    _close("loss", loss_b.detach().numpy(), loss_t.detach().numpy(), loss_r.detach().numpy(), n)
    loss_b.backward()
    loss_t.backward()
    loss_r.backward()
    _grads(m_bg, m_th, m_ref, n)
    _close("grad x", xb.grad.detach().numpy(), xt.grad.detach().numpy(), xr.grad.detach().numpy(), n)
    if states:
        _close("grad h0", hb.grad.detach().numpy(), ht.grad.detach().numpy(), hr.grad.detach().numpy(), n)
        if kind == "LSTM":
            _close("grad c0", cb.grad.detach().numpy(), ct.grad.detach().numpy(), cr.grad.detach().numpy(), n)


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
    # state_dict has PyTorch's keys: the norms' gamma and beta are weight and bias there
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
    m_ref = copy.deepcopy(m_th).double()
    xb, (xt, xr) = bg.from_numpy(x), _both(x)
    xb.requires_grad = True
    yb, yt, yr = m_bg(xb), m_th(xt), m_ref(xr)
    w = rng.standard_normal(x.shape).astype(np.float32)
    n = x.size + 12 + w.size + 16  # input, weight and bias, upstream gradient, an elementwise chain
    _close("y", yb.detach().numpy(), yt.detach().numpy(), yr.detach().numpy(), n)
    bg.sum(yb * bg.from_numpy(w)).backward()
    (yt * torch.from_numpy(w)).sum().backward()
    (yr * torch.from_numpy(w.astype(np.float64))).sum().backward()
    _close("grad x", xb.grad.detach().numpy(), xt.grad.detach().numpy(), xr.grad.detach().numpy(), n)
    _close("grad weight", m_bg.weight.grad.detach().numpy(), m_th.weight.grad.detach().numpy(), m_ref.weight.grad.detach().numpy(), n)
    _close("grad bias", m_bg.bias.grad.detach().numpy(), m_th.bias.grad.detach().numpy(), m_ref.bias.grad.detach().numpy(), n)


def test_rmsnorm_module():
    rng = np.random.RandomState(8)
    x = rng.standard_normal((3, 4, 8)).astype(np.float32)
    m = bg.nn.RMSNorm(8, eps=1e-6)
    y = m(bg.from_numpy(x)).detach().numpy()
    xt, xr = torch.from_numpy(x), torch.from_numpy(x.astype(np.float64))
    want, ref = (t * torch.rsqrt(t.pow(2).mean(-1, keepdim=True) + 1e-6) for t in (xt, xr))
    _close("y", y, want.detach().numpy(), ref.detach().numpy(), x.size + 8 + 16)  # input, gamma, a chain
    assert [n for n, _ in m.named_parameters()] == ["gamma"]
    assert bg.nn.RMSNorm([4, 8], elementwise_affine=False).parameters() == []
