"""bitgrad.nn's modules of issue 29's convolution variants, adaptive pooling and upsampling against
torch.nn's with the same parameters (forward and the parameters' gradients, float64), the shapes
they promise, and the plain Conv2d path's bits through bitgrad.conv2d."""
import numpy as np
import pytest

import bitgrad as bg

torch = pytest.importorskip("torch")


def _copy_params(m_bg, m_th):
    with torch.no_grad():
        m_th.weight.copy_(torch.from_numpy(m_bg.weight.detach().numpy().astype(np.float64)))
        if m_th.bias is not None:
            m_th.bias.copy_(torch.from_numpy(m_bg.bias.detach().numpy().astype(np.float64)))


@pytest.mark.parametrize("make", [
    lambda: (bg.nn.Conv1d(4, 6, 3, stride=2, padding=1, dilation=2, groups=2, seed=1),
             torch.nn.Conv1d(4, 6, 3, stride=2, padding=1, dilation=2, groups=2), (2, 4, 13)),
    lambda: (bg.nn.ConvNd2d(4, 8, (3, 2), stride=(2, 1), padding=(1, 0), dilation=(1, 2), groups=4, seed=2),
             torch.nn.Conv2d(4, 8, (3, 2), stride=(2, 1), padding=(1, 0), dilation=(1, 2), groups=4), (2, 4, 9, 8)),
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
    np.testing.assert_allclose(y.detach().numpy(), yt.detach().numpy(), rtol=1e-4, atol=1e-5)
    bound = np.sqrt(6.0 / (m_th.weight.shape[1] * np.prod(m_th.weight.shape[2:])))  # kaiming_uniform from weight.shape[1]'s fan-in
    w = m_bg.weight.detach().numpy()
    assert w.shape == tuple(m_th.weight.shape) and np.abs(w).max() <= bound and np.abs(w).max() > 0.5 * bound


def test_pool_and_upsample_modules_match_torch():
    x = np.random.RandomState(1).standard_normal((2, 3, 7, 5))
    xb, xt = bg.tensor(x), torch.from_numpy(x)
    for m_bg, m_th in [(bg.nn.AdaptiveAvgPool2d((3, 2)), torch.nn.AdaptiveAvgPool2d((3, 2))),
                       (bg.nn.AdaptiveMaxPool2d(2), torch.nn.AdaptiveMaxPool2d(2)),
                       (bg.nn.GlobalAvgPool(), torch.nn.AdaptiveAvgPool2d(1)),
                       (bg.nn.Upsample(scale_factor=2), torch.nn.Upsample(scale_factor=2)),
                       (bg.nn.Upsample(size=(9, 4), mode="bilinear", align_corners=True),
                        torch.nn.Upsample(size=(9, 4), mode="bilinear", align_corners=True))]:
        y = m_bg(xb)
        assert tuple(y.shape) == m_bg.output_shape(x.shape)
        np.testing.assert_allclose(y.detach().numpy(), m_th(xt).numpy(), rtol=1e-12, atol=1e-12)


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
