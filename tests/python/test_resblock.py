"""bitgrad.nn.BasicBlock (the layer list's resblock) against torchvision's BasicBlock, written out
here as torchvision writes it (torchvision itself is not a dependency): the same state-dict names,
weights loaded one to one, then training forwards (output, every gradient, running statistics)
and an evaluation forward agree in float32.

Both libraries are compared with the torch block in float64 on the same float32 values (the exact
value for float32 purposes; parity_bounds.py): bitgrad's error <= max(gamma(n) * S, K_TORCH *
torch's error), S the reference's largest magnitude, n the number of values the block's results
are made of (input, parameters, buffers, upstream gradient) plus 16 elementwise roundings per
layer (2 steps of it for the running statistics and the evaluation after them)."""
import copy

import numpy as np
import pytest

import bitgrad as bg
import parity_bounds as pb

torch = pytest.importorskip("torch")
nn = torch.nn


class TorchvisionBasicBlock(nn.Module):
    """torchvision.models.resnet.BasicBlock with its default arguments."""

    def __init__(self, inplanes, planes, stride=1):
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride=1, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = None
        if stride != 1 or inplanes != planes:
            self.downsample = nn.Sequential(nn.Conv2d(inplanes, planes, 1, stride=stride, bias=False), nn.BatchNorm2d(planes))

    def forward(self, x):
        identity = x
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        if self.downsample is not None:
            identity = self.downsample(x)
        return self.relu(out + identity)


def _close(what, a, b, ref, n):
    a, b, ref = (np.asarray(v, dtype=np.float64) for v in (a, b, ref))
    pb.check_vs_reference(what, a, b, ref, pb.gamma(n, pb.U32) * pb.scale(ref))


@pytest.mark.parametrize("cin,cout,stride", [(4, 4, 1), (4, 8, 2), (3, 6, 1)])
def test_basic_block_is_torchvisions(cin, cout, stride):
    m_bg = bg.nn.BasicBlock(cin, cout, stride, seed=5)
    m_th = TorchvisionBasicBlock(cin, cout, stride)
    sd = m_bg.state_dict()
    assert sorted(sd) == sorted(m_th.state_dict())
    assert [n for n, _ in m_bg.named_parameters()] == [n for n, _ in m_th.named_parameters()]
    assert (m_bg.downsample is None) == (m_th.downsample is None)
    m_th.load_state_dict({k: torch.from_numpy(np.array(v.detach().numpy())) for k, v in sd.items()}, strict=True)
    m_ref = copy.deepcopy(m_th).double()
    rng = np.random.RandomState(cin + cout + stride)
    shape = (6, cin, 9, 9)
    n_state = sum(t.numel() for t in m_th.state_dict().values())
    n_out = int(np.prod(m_bg.output_shape(shape)))
    n = int(np.prod(shape)) + n_state + n_out + 16 * 7  # 7 layers: conv, bn, relu, conv, bn, add, relu (downsample: 2 more)
    for step in range(2):
        x = (rng.standard_normal(shape) * (step + 1)).astype(np.float32)
        xb = bg.from_numpy(x.copy())
        xb.requires_grad = True
        xt = torch.from_numpy(x.copy()).requires_grad_(True)
        xr = torch.from_numpy(x.astype(np.float64)).requires_grad_(True)
        yb = m_bg(xb, bg.nn.Context(training=True))
        yt = m_th(xt)
        yr = m_ref(xr)
        assert tuple(yb.shape) == tuple(yt.shape) == m_bg.output_shape(shape)
        _close("y step %d" % step, yb.detach().numpy(), yt.detach().numpy(), yr.detach().numpy(), n)
        r = rng.standard_normal(tuple(yt.shape)).astype(np.float32)
        (yb * bg.from_numpy(r)).sum().backward()
        (yt * torch.from_numpy(r)).sum().backward()
        (yr * torch.from_numpy(r.astype(np.float64))).sum().backward()
        _close("grad x", xb.grad.numpy(), xt.grad.numpy(), xr.grad.numpy(), n)
        th, ref = dict(m_th.named_parameters()), dict(m_ref.named_parameters())
        for name, p in m_bg.named_parameters():
            _close("grad " + name, p.grad.numpy(), th[name].grad.numpy(), ref[name].grad.numpy(), n)
            p.grad = None
        m_th.zero_grad()
        m_ref.zero_grad()
    tsd, rsd = m_th.state_dict(), m_ref.state_dict()
    for name, v in m_bg.state_dict().items():
        if "running" in name:
            _close(name, v.numpy(), tsd[name].numpy(), rsd[name].numpy(), 2 * n)
        elif "num_batches" in name:
            assert int(v.numpy()) == int(tsd[name]) == 2
    m_th.eval()
    m_ref.eval()
    m_bg.eval()
    x = rng.standard_normal(shape).astype(np.float32)
    _close("eval", m_bg(bg.from_numpy(x.copy())).detach().numpy(), m_th(torch.from_numpy(x.copy())).detach().numpy(),
           m_ref(torch.from_numpy(x.astype(np.float64))).detach().numpy(), 3 * n)
