"""bitgrad.onnx: ONNX models as bitgrad modules (docs/onnx.md, "Bring your PyTorch model")."""
from . import _bitgrad as _b

globals().update({k: v for k, v in vars(_b.onnx).items() if not k.startswith("__")})
GraphModule = _b.onnx.GraphModule
