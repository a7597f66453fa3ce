# Type stub of bitgrad.optim (src/python/optim.cpp): optimizers, schedules, gradient clipping.
from typing import Iterable, Literal, Mapping, Optional, Tuple, Union

from . import Tensor
from .nn import Module

# a module (its named parameters), (name, tensor) pairs, or tensors (named "0", "1", ...)
_Params = Union[Module, Iterable[Tuple[str, Tensor]], Iterable[Tensor]]

class Schedule:
    def __init__(
        self,
        kind: Literal["constant", "step", "cosine"] = "constant",
        *,
        lr: float,
        gamma: float = 0.1,
        step_size: int = 1000,
        total_steps: int = 0,
        min_lr: float = 0.0,
        warmup_steps: int = 0,
    ) -> None: ...
    def at(self, step: int) -> float: ...
    def __call__(self, step: int) -> float: ...

class Optimizer:
    def step(self, lr: Optional[float] = None) -> None: ...
    def zero_grad(self) -> None: ...
    lr: float
    @property
    def steps(self) -> int: ...
    @property
    def params(self) -> list[Tuple[str, Tensor]]: ...
    def state_dict(self) -> dict[str, Union[Tensor, int]]: ...
    def load_state_dict(self, state: Mapping[str, Union[Tensor, int]]) -> None: ...

def SGD(
    params: _Params,
    lr: Union[float, Schedule] = 0.01,
    *,
    momentum: float = 0.0,
    weight_decay: float = 0.0,
    nesterov: bool = False,
    schedule: Optional[Schedule] = None,
) -> Optimizer: ...
def Adam(
    params: _Params,
    lr: Union[float, Schedule] = 0.001,
    *,
    betas: Tuple[float, float] = (0.9, 0.999),
    eps: float = 1e-08,
    weight_decay: float = 0.0,
    decay_matrices_only: bool = False,
    schedule: Optional[Schedule] = None,
) -> Optimizer: ...
def AdamW(
    params: _Params,
    lr: Union[float, Schedule] = 0.001,
    *,
    betas: Tuple[float, float] = (0.9, 0.999),
    eps: float = 1e-08,
    weight_decay: float = 0.01,
    decay_matrices_only: bool = False,
    schedule: Optional[Schedule] = None,
) -> Optimizer: ...
def clip_grad_norm(params: _Params, max_norm: float) -> float: ...
def grad_norm(params: _Params) -> float: ...
