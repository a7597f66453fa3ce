"""The environment variables a recorded script reads: os.environ's reads are noted while a
recording runs, so that a replay (bitgrad.torch.replay) can give the script the values it saw —
a switch such as RESEED=1 decides the numbers as much as the arguments do."""
import os
import re
import threading

_lock = threading.Lock()
_reads = None  # name -> the value read (None: read while unset), while noting


class _NotingEnviron(type(os.environ)):
    # os.environ's own class with its reads noted: get(), [] and `in` go through these two
    def __getitem__(self, key):
        try:
            value = super().__getitem__(key)
        except KeyError:
            _note(key, None)
            raise
        _note(key, value)
        return value

    def __contains__(self, key):
        found = super().__contains__(key)
        _note(key, super().__getitem__(key) if found else None)
        return found


def _note(key, value):
    with _lock:
        if _reads is not None and isinstance(key, str) and key not in _reads:
            _reads[key] = value  # the first read: what the script started from


def start():
    """Notes the reads of os.environ from now on."""
    global _reads
    with _lock:
        _reads = {}
    os.environ.__class__ = _NotingEnviron


# names whose values are credentials, not settings: the manifest says they were read, not what
# they hold (a replay then leaves them as they are in its own environment)
_SECRET = re.compile(r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH|COOKIE|SESSION", re.IGNORECASE)
REDACTED = "<redacted>"


def stop():
    """Stops noting; returns {name: value or None} of the names read, in name order, the values
    of credentials (by name) as REDACTED."""
    global _reads
    if type(os.environ) is _NotingEnviron:
        os.environ.__class__ = _NotingEnviron.__mro__[1]
    with _lock:
        reads, _reads = _reads or {}, None
    return {k: (REDACTED if v is not None and _SECRET.search(k) else v) for k, v in sorted(reads.items())}
