# Type stub of bitgrad.nn (src/python/nn.cpp): modules whose forward takes an nn.Context.
from typing import Any, Literal, Mapping, Optional, Sequence, Tuple, Union

from . import Tensor

_Init = Literal["kaiming_uniform", "kaiming_normal", "xavier_uniform", "xavier_normal", "zeros", "gpt2"]
_Precision = Literal["fp32", "bf16", "fp16"]

class Context:
    training: bool
    seed: int
    step: int
    row_offset: int
    stochastic: bool
    precision: str
    def __init__(
        self,
        *,
        training: bool = False,
        seed: int = 0,
        step: int = 0,
        row_offset: int = 0,
        precision: _Precision = "fp32",
        stochastic: bool = False,
    ) -> None: ...

class Module:
    def forward(self, x: Tensor, ctx: Optional[Context] = None) -> Tensor: ...
    def __call__(self, x: Tensor, ctx: Optional[Context] = None) -> Tensor: ...
    def output_shape(self, input_shape: Sequence[int]) -> Tuple[int, ...]: ...
    def parameters(self) -> list[Tensor]: ...
    def named_parameters(self) -> list[Tuple[str, Tensor]]: ...
    def named_buffers(self) -> list[Tuple[str, Tensor]]: ...
    def state_dict(self) -> dict[str, Tensor]: ...
    def load_state_dict(self, state: Mapping[str, Tensor], strict: bool = True) -> None: ...
    def children(self) -> list[Module]: ...
    def named_children(self) -> list[Tuple[str, Module]]: ...
    def init(self, seed: int, weights: _Init = "kaiming_uniform") -> None: ...
    def zero_grad(self) -> None: ...

class Linear(Module):
    def __init__(
        self, in_features: int, out_features: int, bias: bool = True, *, seed: int = 0, weights: _Init = "kaiming_uniform"
    ) -> None: ...
    @property
    def weight(self) -> Tensor: ...
    @property
    def bias(self) -> Optional[Tensor]: ...
    @property
    def in_features(self) -> int: ...
    @property
    def out_features(self) -> int: ...

class Conv2d(Module):
    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int,
        stride: int = 1,
        padding: int = 0,
        bias: bool = True,
        *,
        seed: int = 0,
        weights: _Init = "kaiming_uniform",
    ) -> None: ...
    @property
    def weight(self) -> Tensor: ...
    @property
    def bias(self) -> Optional[Tensor]: ...

# ReLU(), GELU(), Tanh(), Sigmoid() are factories of this one class
class _Activation(Module): ...

def ReLU() -> _Activation: ...
def GELU() -> _Activation: ...
def Tanh() -> _Activation: ...
def Sigmoid() -> _Activation: ...

class Dropout(Module):
    def __init__(self, p: float = 0.5, layer_id: int = 0) -> None: ...
    @property
    def layer_id(self) -> int: ...

class Flatten(Module):
    def __init__(self) -> None: ...

# MaxPool2d(...) and AvgPool2d(...) are factories of this one class
class _Pool2d(Module): ...

def MaxPool2d(kernel_size: int, stride: int = 0) -> _Pool2d: ...
def AvgPool2d(kernel_size: int, stride: int = 0) -> _Pool2d: ...

class LayerNorm(Module):
    def __init__(self, features: int, eps: float = 1e-05, bias: bool = True) -> None: ...
    @property
    def weight(self) -> Tensor: ...
    @property
    def bias(self) -> Optional[Tensor]: ...

class Embedding(Module):
    def __init__(self, num_embeddings: int, embedding_dim: int, *, seed: int = 0) -> None: ...
    @property
    def weight(self) -> Tensor: ...

class TokenEmbedding(Module):
    def __init__(
        self, vocab_size: int, block_size: int, dim: int, dropout: float = 0.0, dropout_id: int = 0, *, seed: int = 0
    ) -> None: ...
    @property
    def wte(self) -> Tensor: ...
    @property
    def wpe(self) -> Tensor: ...

class TransformerBlock(Module):
    def __init__(
        self,
        dim: int,
        n_head: int,
        dropout: float = 0.0,
        bias: bool = True,
        n_layer: int = 1,
        dropout_id: int = 0,
        *,
        seed: int = 0,
    ) -> None: ...

class TiedHead(Module):
    def __init__(self, weight: Tensor) -> None: ...

class Sequential(Module):
    def __init__(
        self,
        *layers: Module,
        seed: Optional[int] = None,
        weights: _Init = "kaiming_uniform",
        recompute: Literal["none", "blocks", "all"] = "none",
    ) -> None: ...
    def append(self, layer: Module) -> None: ...
    def __len__(self) -> int: ...
    def __getitem__(self, index: int) -> Module: ...

# normalisation and recurrent layers of issue 29 (src/python/norm_rnn.cpp)
class RMSNorm(Module):
    def __init__(self, normalized_shape: Union[int, Sequence[int]], eps: float = 1e-05, elementwise_affine: bool = True) -> None: ...
    @property
    def weight(self) -> Optional[Tensor]: ...

class GroupNorm(Module):
    def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-05, affine: bool = True) -> None: ...
    @property
    def weight(self) -> Optional[Tensor]: ...
    @property
    def bias(self) -> Optional[Tensor]: ...

# InstanceNorm(...) is a GroupNorm of one group per channel
def InstanceNorm(num_features: int, eps: float = 1e-05, affine: bool = False) -> GroupNorm: ...

# RNN(...), LSTM(...) and GRU(...) are factories of this one class
class _Recurrent(Module):
    def run(self, x: Tensor, h0: Optional[Tensor] = None, c0: Optional[Tensor] = None) -> Tuple[Tensor, Any]: ...
    def layer_params(self) -> list[Tuple[Tensor, Tensor, Optional[Tensor], Optional[Tensor]]]: ...
    @property
    def input_size(self) -> int: ...
    @property
    def hidden_size(self) -> int: ...
    @property
    def num_layers(self) -> int: ...
    @property
    def batch_first(self) -> bool: ...
    @property
    def last_only(self) -> bool: ...

def RNN(input_size: int, hidden_size: int, num_layers: int = 1, nonlinearity: Literal["tanh", "relu"] = "tanh", bias: bool = True,
        batch_first: bool = False, *, last_only: bool = False, seed: int = 0) -> _Recurrent: ...
def LSTM(input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True, batch_first: bool = False, *,
         last_only: bool = False, seed: int = 0) -> _Recurrent: ...
def GRU(input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True, batch_first: bool = False, *,
        last_only: bool = False, seed: int = 0) -> _Recurrent: ...

def initialize(module: Module, weights: _Init, seed: int) -> None: ...

# BatchNorm1d(...) and BatchNorm2d(...) are factories of this one class (issue 29)
class _BatchNorm(Module):
    @property
    def weight(self) -> Optional[Tensor]: ...
    @property
    def bias(self) -> Optional[Tensor]: ...
    @property
    def running_mean(self) -> Tensor: ...
    @property
    def running_var(self) -> Tensor: ...
    @property
    def num_batches_tracked(self) -> Tensor: ...

def BatchNorm1d(num_features: int, eps: float = 1e-05, momentum: float = 0.1, affine: bool = True) -> _BatchNorm: ...
def BatchNorm2d(num_features: int, eps: float = 1e-05, momentum: float = 0.1, affine: bool = True) -> _BatchNorm: ...

# ---- issue 29: convolution variants, adaptive pooling, upsampling (src/python/nn_spatial.cpp) ----
# Conv1d(...), ConvNd2d(...), ConvTranspose1d(...) and ConvTranspose2d(...) are factories of this one class
class Conv(Module):
    @property
    def weight(self) -> Tensor: ...
    @property
    def bias(self) -> Optional[Tensor]: ...

def Conv1d(
    in_channels: int,
    out_channels: int,
    kernel_size: Union[int, Sequence[int]],
    stride: Union[int, Sequence[int]] = 1,
    padding: Union[int, Sequence[int]] = 0,
    dilation: Union[int, Sequence[int]] = 1,
    groups: int = 1,
    bias: bool = True,
    *,
    seed: int = 0,
    weights: _Init = "kaiming_uniform",
) -> Conv: ...
def ConvNd2d(
    in_channels: int,
    out_channels: int,
    kernel_size: Union[int, Sequence[int]],
    stride: Union[int, Sequence[int]] = 1,
    padding: Union[int, Sequence[int]] = 0,
    dilation: Union[int, Sequence[int]] = 1,
    groups: int = 1,
    bias: bool = True,
    *,
    seed: int = 0,
    weights: _Init = "kaiming_uniform",
) -> Conv: ...
def ConvTranspose1d(
    in_channels: int,
    out_channels: int,
    kernel_size: Union[int, Sequence[int]],
    stride: Union[int, Sequence[int]] = 1,
    padding: Union[int, Sequence[int]] = 0,
    output_padding: Union[int, Sequence[int]] = 0,
    groups: int = 1,
    bias: bool = True,
    dilation: Union[int, Sequence[int]] = 1,
    *,
    seed: int = 0,
    weights: _Init = "kaiming_uniform",
) -> Conv: ...
def ConvTranspose2d(
    in_channels: int,
    out_channels: int,
    kernel_size: Union[int, Sequence[int]],
    stride: Union[int, Sequence[int]] = 1,
    padding: Union[int, Sequence[int]] = 0,
    output_padding: Union[int, Sequence[int]] = 0,
    groups: int = 1,
    bias: bool = True,
    dilation: Union[int, Sequence[int]] = 1,
    *,
    seed: int = 0,
    weights: _Init = "kaiming_uniform",
) -> Conv: ...

# AdaptiveAvgPool2d(...), AdaptiveMaxPool2d(...) and GlobalAvgPool() are factories of this one class
class _AdaptivePool2d(Module): ...

def AdaptiveAvgPool2d(output_size: Union[int, Sequence[int]]) -> _AdaptivePool2d: ...
def AdaptiveMaxPool2d(output_size: Union[int, Sequence[int]]) -> _AdaptivePool2d: ...
def GlobalAvgPool() -> _AdaptivePool2d: ...

class Upsample(Module):
    def __init__(
        self,
        size: Union[None, int, Sequence[int]] = None,
        scale_factor: Union[None, float, Sequence[float]] = None,
        mode: Literal["nearest", "bilinear"] = "nearest",
        align_corners: Optional[bool] = None,
    ) -> None: ...

# ---- issue 29 item 8: torchvision's residual block (src/python/nn_spatial.cpp) ----
class BasicBlock(Module):
    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        stride: int = 1,
        *,
        eps: float = 1e-05,
        momentum: float = 0.1,
        seed: int = 0,
        weights: _Init = "kaiming_uniform",
    ) -> None: ...
    @property
    def conv1(self) -> Conv2d: ...
    @property
    def bn1(self) -> _BatchNorm: ...
    @property
    def conv2(self) -> Conv2d: ...
    @property
    def bn2(self) -> _BatchNorm: ...
    @property
    def downsample(self) -> Optional[Sequential]: ...
