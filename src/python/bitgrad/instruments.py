"""bitgrad.instruments: diff, audit, sensitivity, report, sample, read_metrics, machine_manifest.
Each returns its findings as Python objects."""
from . import _bitgrad as _b

globals().update({k: v for k, v in vars(_b.instruments).items() if not k.startswith("__")})
