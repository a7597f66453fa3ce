"""bitgrad.nn: modules (Linear, Conv2d, pools, LayerNorm, Embedding, Dropout, activations,
Sequential, the transformer blocks) and nn.Context, the training/evaluation switch that keys
dropout. See docs/python.md."""
from . import _bitgrad as _b

globals().update({k: v for k, v in vars(_b.nn).items() if not k.startswith("__")})
Flatten = _b.nn.Flatten
Module = _b.nn.Module
Sequential = _b.nn.Sequential
Context = _b.nn.Context
