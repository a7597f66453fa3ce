"""bitgrad.optim: SGD, Adam, AdamW, Schedule, clip_grad_norm, grad_norm (numerics.md, Optimizers)."""
from . import _bitgrad as _b

globals().update({k: v for k, v in vars(_b.optim).items() if not k.startswith("__")})
