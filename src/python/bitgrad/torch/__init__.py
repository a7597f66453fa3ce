"""bitgrad.torch: records an unmodified PyTorch training into a bitgrad run directory
(manifest.json, trace.jsonl) that `bitgrad diff` and bitgrad.instruments.diff compare as they
compare bitgrad's own runs. docs/torch.md.

    python3 -m bitgrad.torch.record --out runs/a -- train.py ARGS...

    with bitgrad.torch.record("runs/a"):
        train()
"""

# Loaded on first use: importing torch takes seconds, and the launcher answers a mistyped
# command line without it.
_LAZY = {"Recorder": "bitgrad.torch._recorder", "record": "bitgrad.torch._recorder",
         "fingerprint": "bitgrad.torch._fingerprint"}


def __getattr__(name):
    where = _LAZY.get(name)
    if where is None:
        raise AttributeError("module 'bitgrad.torch' has no attribute %r" % name)
    import importlib

    value = getattr(importlib.import_module(where), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
