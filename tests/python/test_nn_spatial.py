"""bitgrad.nn's modules of the convolution variants, adaptive pooling and upsampling against
torch.nn's with the same parameters (forward and the parameters' gradients, float64), the shapes
they promise, and the plain Conv2d path's bits through bitgrad.conv2d."""
import copy

import numpy as np
import pytest

import bitgrad as bg
import parity_bounds as pb

torch = pytest.importorskip("torch")


def _copy_params(m_bg, m_th):
    with torch.no_grad():
        m_th.weight.copy_(torch.from_numpy(m_bg.weight.detach().numpy().astype(np.float64)))
        if m_th.bias is not None:
            m_th.bias.copy_(torch.from_numpy(m_bg.bias.detach().numpy().astype(np.float64)))


@pytest.mark.parametrize("make", [
    lambda: (bg.nn.Conv1d(4, 6, 3, stride=2, padding=1, dilation=2, groups=2, seed=1),
             torch.nn.Conv1d(4, 6, 3, stride=2, padding=1, dilation=2, groups=2), (2, 4, 13)),
    lambda: (bg.nn.Conv2d(4, 8, (3, 2), stride=(2, 1), padding=(1, 0), dilation=(1, 2), groups=4, seed=2),
             torch.nn.Conv2d(4, 8, (3, 2), stride=(2, 1), padding=(1, 0), dilation=(1, 2), groups=4), (2, 4, 9, 8)),
    # PyTorch's positional order: stride, padding, dilation, groups, bias
    lambda: (bg.nn.Conv2d(4, 6, 3, 2, 1, 1, 2, False, seed=5), torch.nn.Conv2d(4, 6, 3, 2, 1, 1, 2, False), (2, 4, 7, 6)),
    lambda: (bg.nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2, seed=3),
             torch.nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2), (2, 4, 5, 4)),
    lambda: (bg.nn.ConvTranspose1d(3, 2, 4, stride=3, padding=1, seed=4),
             torch.nn.ConvTranspose1d(3, 2, 4, stride=3, padding=1), (2, 3, 6)),
])
def test_conv_modules_match_torch(make):
    m_bg, m_th, shape = make()
    m_th = m_th.double()
    _copy_params(m_bg, m_th)
    x = np.random.RandomState(0).standard_normal(shape)
    xb = bg.tensor(x.astype(np.float32))
    y = m_bg(xb)
    yt = m_th(torch.from_numpy(x))
    assert tuple(y.shape) == tuple(yt.shape) == m_bg.output_shape(shape)
    # bitgrad in f32 on x rounded to f32 (relative error u), torch in f64 (error ~1e-16, the exact
    # value here): an output is a sum of at most k = (in channels / groups) * kernel products and
    # the bias, so |y - exact| <= u M + gamma(k + 1) M <= gamma(k + 2) M per element, with M the
    # same convolution of |x| with |w| and |bias| (in f64: the sum of the terms' magnitudes)
    k = m_th.in_channels // m_th.groups * int(np.prod(m_th.kernel_size))
    m_abs = copy.deepcopy(m_th)
    with torch.no_grad():
        for p in m_abs.parameters():
            p.abs_()
        mag = m_abs(torch.from_numpy(np.abs(x))).numpy()
    err = np.abs(y.detach().numpy().astype(np.float64) - yt.detach().numpy())
    assert np.all(err <= pb.gamma(k + 2, pb.U32) * mag), float(np.max(err / (pb.gamma(k + 2, pb.U32) * mag)))
    bound = np.sqrt(6.0 / (m_th.weight.shape[1] * np.prod(m_th.weight.shape[2:])))  # kaiming_uniform from weight.shape[1]'s fan-in
    w = m_bg.weight.detach().numpy()
    assert w.shape == tuple(m_th.weight.shape) and np.abs(w).max() <= bound and np.abs(w).max() > 0.5 * bound


def test_pool_and_upsample_modules_match_torch():
    x = np.random.RandomState(1).standard_normal((2, 3, 7, 5))
    xb, xt = bg.tensor(x), torch.from_numpy(x)
    sx = float(np.max(np.abs(x)))
    # f64 on both sides; the bound on |bitgrad - torch| (2: each library's error):
    # * max pooling, nearest upsampling: copies, equal;
    # * average pooling of bins of at most k values: a sum of k terms and a division, each side
    #   within gamma(k + 1) times the pooling of |x| (the same module on |x|), elementwise;
    # * bilinear (align_corners, sizes <= 7): a 1-D weight comes from the rounded scale and source
    #   coordinate (< 7), within 2 * 7 u absolute; a 2-D weight is the rounded product of two:
    #   within (4 * 7 + 1) u; 4 weighted terms summed (gamma(4) of their magnitudes, each <= max|x|).
    bilinear = 2 * 4 * ((4 * 7 + 1) * pb.U64 + pb.gamma(4, pb.U64)) * sx
    for m_bg, m_th, kind in [(bg.nn.AdaptiveAvgPool2d((3, 2)), torch.nn.AdaptiveAvgPool2d((3, 2)), 9),  # bins <= 3 x 3
                             (bg.nn.AdaptiveMaxPool2d(2), torch.nn.AdaptiveMaxPool2d(2), "exact"),
                             (bg.nn.GlobalAvgPool(), torch.nn.AdaptiveAvgPool2d(1), 35),
                             (bg.nn.Upsample(scale_factor=2), torch.nn.Upsample(scale_factor=2), "exact"),
                             (bg.nn.Upsample(size=(9, 4), mode="bilinear", align_corners=True),
                              torch.nn.Upsample(size=(9, 4), mode="bilinear", align_corners=True), "bilinear")]:
        y = m_bg(xb)
        assert tuple(y.shape) == m_bg.output_shape(x.shape)
        got, want = y.detach().numpy(), m_th(xt).numpy()
        if kind == "exact":
            np.testing.assert_array_equal(got, want)
        elif kind == "bilinear":
            assert np.max(np.abs(got - want)) <= bilinear
        else:
            assert np.all(np.abs(got - want) <= 2 * pb.gamma(kind + 1, pb.U64) * m_th(torch.from_numpy(np.abs(x))).numpy())


def test_pools_take_torchs_options():
    x = np.random.RandomState(3).standard_normal((2, 3, 9, 7))
    xb, xt = bg.tensor(x), torch.from_numpy(x)
    for m_bg, m_th, k in [(bg.nn.MaxPool2d(2), torch.nn.MaxPool2d(2), 0),
                          (bg.nn.MaxPool2d(3, 2, 1, 2, False, True), torch.nn.MaxPool2d(3, 2, 1, 2, False, True), 0),
                          (bg.nn.MaxPool2d((3, 2), stride=(1, 2)), torch.nn.MaxPool2d((3, 2), stride=(1, 2)), 0),
                          (bg.nn.AvgPool2d(3, 2, 1), torch.nn.AvgPool2d(3, 2, 1), 9),
                          (bg.nn.AvgPool2d(3, 2, 1, True, False), torch.nn.AvgPool2d(3, 2, 1, True, False), 9)]:
        y = m_bg(xb)
        assert tuple(y.shape) == m_bg.output_shape(x.shape)
        got, want = y.detach().numpy(), m_th(xt).numpy()
        if k == 0:
            np.testing.assert_array_equal(got, want)
        else:  # f64 on both sides: a sum of at most k terms and a division each
            assert np.all(np.abs(got - want) <= 2 * pb.gamma(k + 1, pb.U64) * m_th(torch.from_numpy(np.abs(x))).numpy())
    with pytest.raises(bg.Error, match="return_indices"):
        bg.nn.MaxPool2d(2, return_indices=True)
    with pytest.raises(bg.Error, match="divisor_override"):
        bg.nn.AvgPool2d(2, divisor_override=3)
    with pytest.raises(bg.Error, match="stride"):
        bg.nn.MaxPool2d(2, 0)(xb)


def test_plain_modules_have_the_bits_of_the_plain_ops():
    rs = np.random.RandomState(4)
    x = bg.tensor(rs.standard_normal((2, 3, 8, 8)).astype(np.float32))
    conv = bg.nn.Conv2d(3, 4, 3, stride=2, padding=1, seed=7)
    want = bg.conv2d(x, conv.weight, conv.bias, stride=2, padding=1).detach().numpy()
    assert np.array_equal(conv(x).detach().numpy().view(np.uint32), want.view(np.uint32))
    for mod, op in [(bg.nn.MaxPool2d(2), bg.max_pool2d), (bg.nn.AvgPool2d(3, 2), bg.avg_pool2d)]:
        k = 2 if op is bg.max_pool2d else 3
        s = 2
        assert np.array_equal(mod(x).numpy().view(np.uint32), op(x, k, s).numpy().view(np.uint32))
    old = bg.nn.ConvNd2d(3, 4, 3, stride=2, padding=1, seed=7)  # Conv2d's former name
    assert np.array_equal(old(x).detach().numpy().view(np.uint32), conv(x).detach().numpy().view(np.uint32))
    assert repr(bg.nn.Conv2d(3, 4, 3, padding=1, bias=False, seed=1)).startswith("Conv2d(3, 4, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1), bias=False)")


def test_plain_conv2d_options_run_the_original_op():
    rs = np.random.RandomState(2)
    x = bg.tensor(rs.standard_normal((2, 3, 8, 8)).astype(np.float32))
    w = bg.tensor(rs.standard_normal((4, 3, 3, 3)).astype(np.float32))
    a = bg.conv2d(x, w, stride=2, padding=1).numpy()
    b = bg.conv2d(x, w, stride=(2, 2), padding=(1, 1, 1, 1), dilation=1, groups=1).numpy()
    assert np.array_equal(a.view(np.uint32), b.view(np.uint32))


def test_errors_name_the_op():
    x = bg.zeros(1, 4, 5, 5)
    with pytest.raises(bg.Error, match="conv"):
        bg.conv2d(x, bg.zeros(3, 2, 3, 3), groups=2)
    with pytest.raises(bg.Error, match="interpolate"):
        bg.interpolate(x)
    with pytest.raises(bg.Error, match="max_pool2d"):
        bg.max_pool2d(x, 7)
