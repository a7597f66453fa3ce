"""bitgrad.io: safetensors files, written atomically with bitgrad's XXH3-128 checksum."""
from . import _bitgrad as _b

globals().update({k: v for k, v in vars(_b.io).items() if not k.startswith("__")})
