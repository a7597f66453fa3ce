"""Configurations from Python: a file path, a dict of the file's tables, or a bitgrad.Config."""
import math
import os

from . import _bitgrad


def _value(v, where):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if not math.isfinite(v):
            raise _bitgrad.InputError("%s: %r is not a finite number" % (where, v))
        return repr(v)
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'
    if isinstance(v, dict):
        return "{ " + ", ".join("%s = %s" % (k, _value(x, where + "." + k)) for k, x in v.items()) + " }"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_value(x, where) for x in v) + "]"
    raise _bitgrad.InputError("%s: a %s cannot be written in a configuration" % (where, type(v).__name__))


def to_toml(d):
    """The TOML text of a configuration dict: top-level values, then one table per dict value."""
    if not isinstance(d, dict):
        raise TypeError("a configuration is a path, a dict or a bitgrad.Config, got %s" % type(d).__name__)
    top, tables = [], []
    for k, v in d.items():
        if not isinstance(k, str):
            raise _bitgrad.InputError("configuration keys are strings, got %r" % (k,))
        if isinstance(v, dict):
            tables.append("[%s]" % k)
            for kk, vv in v.items():
                tables.append("%s = %s" % (kk, _value(vv, k + "." + kk)))
            tables.append("")
        else:
            top.append("%s = %s" % (k, _value(v, k)))
    return "\n".join(top + [""] + tables)


def load(c, name="<dict>"):
    if isinstance(c, _bitgrad.Config):
        return c
    if isinstance(c, (str, os.PathLike)):
        return _bitgrad.load_config(os.fspath(c))
    return _bitgrad.parse_config(to_toml(c), name)
