"""The type stubs (src/python/bitgrad/*.pyi) against the module they describe: every public name
of each module is in its stub and every name of the stub is in the module; every class's public
members likewise; and every function's or method's parameter names (with a mark on those that have
a default) are those of the module, read from pybind11's signature lines or, for the functions
written in Python, from inspect.signature. A failure lists each difference.

Types are not compared (the stubs say more than pybind11's signatures: Literal, Union, overloads
of *shape), and a pybind11 function taking *args/**kwargs is compared by name only.
"""
import ast
import importlib
import inspect
import re
import types

import pytest

import bitgrad  # noqa: F401

from conftest import SOURCE_DIR

STUBS = {
    "bitgrad": "__init__.pyi",
    "bitgrad.nn": "nn.pyi",
    "bitgrad.optim": "optim.pyi",
    "bitgrad.data": "data.pyi",
    "bitgrad.io": "io.pyi",
    "bitgrad.instruments": "instruments.pyi",
    "bitgrad.distributed": "distributed.pyi",
    "bitgrad.onnx": "onnx.pyi",
    "bitgrad.autograd": "autograd.pyi",
}


def _public(name):
    return not name.startswith("_")


def _stub_params(fn):
    """('x', 'axis=', '*shape', ...) of an ast function, without self."""
    a = fn.args
    pos = a.posonlyargs + a.args
    defaults = [None] * (len(pos) - len(a.defaults)) + list(a.defaults)
    npos = len(a.posonlyargs)
    # a positional-only parameter's name is its stub's own (pybind11 calls an unnamed one argN)
    out = [("<pos>" if i < npos and p.arg not in ("self", "cls") else p.arg) + ("=" if d is not None else "")
           for i, (p, d) in enumerate(zip(pos, defaults))]
    if a.vararg:
        out.append("*" + a.vararg.arg)
    out += [p.arg + ("=" if d is not None else "") for p, d in zip(a.kwonlyargs, a.kw_defaults)]
    if a.kwarg:
        out.append("**" + a.kwarg.arg)
    if out and out[0] in ("self", "cls"):
        out = out[1:]
    return tuple(out)


class Stub:
    """The names of a stub's top level or of one of its classes: functions (with their overloads'
    parameters), classes, variables."""

    def __init__(self, body):
        self.functions, self.classes, self.names, self.bases = {}, {}, set(), []
        for node in body:
            self._add(node)

    def _add(self, node):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            setter = any(isinstance(d, ast.Attribute) and d.attr in ("setter", "deleter") for d in node.decorator_list)
            prop = any(isinstance(d, ast.Name) and d.id == "property" for d in node.decorator_list)
            self.names.add(node.name)
            if not (setter or prop):
                self.functions.setdefault(node.name, set()).add(_stub_params(node))
        elif isinstance(node, ast.ClassDef):
            self.names.add(node.name)
            self.classes[node.name] = Stub(node.body)
            self.classes[node.name].bases = [b.id for b in node.bases if isinstance(b, ast.Name)]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            self.names.add(node.target.id)
        elif isinstance(node, ast.Assign):
            self.names.update(t.id for t in node.targets if isinstance(t, ast.Name))
            # `conv1d = conv2d`: an alias of a stub function has its parameters, compared as its own
            if isinstance(node.value, ast.Name) and node.value.id in self.functions:
                for t in node.targets:
                    if isinstance(t, ast.Name):
                        self.functions[t.id] = self.functions[node.value.id]
        elif isinstance(node, ast.ImportFrom) and node.module is None:  # from . import nn as nn
            self.names.update(a.asname or a.name for a in node.names if a.asname == a.name)
        elif isinstance(node, ast.If):  # if sys.version_info >= ...: both branches may exist
            for n in node.body + node.orelse:
                self._add(n)


_SIG = re.compile(r"^(?:\d+\. )?(\w+)\((.*)\) -> ")


def _split_top(text):
    parts, depth, cur = [], 0, ""
    for ch in text:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    if cur.strip():
        parts.append(cur)
    return [p.strip() for p in parts]


def _module_params(obj, name):
    """The set of parameter tuples of a function or method of the module, or None when it cannot
    be compared (pybind11's *args/**kwargs, or no signature to read)."""
    doc = getattr(obj, "__doc__", None) or ""
    sigs = set()
    # an alias (`nn.ConvNd2d` is `nn.Conv2d`) carries its target's name and signatures
    names = {name, getattr(getattr(obj, "__wrapped__", obj), "__name__", name)}
    for line in doc.splitlines():
        m = _SIG.match(line.strip())
        if not m or m.group(1) not in names:
            continue
        params = []
        for p in _split_top(m.group(2)):
            head = p.split(":")[0].split("=")[0].strip()
            head = "<pos>" if re.fullmatch(r"arg\d+", head) else head
            params.append(head + ("=" if "=" in p else ""))
        if params and params[0] == "self":
            params = params[1:]
        if any(p.startswith("*") for p in params):
            return None
        sigs.add(tuple(params))
    if sigs:
        return sigs
    if isinstance(obj, types.FunctionType):
        out = []
        for p in inspect.signature(obj).parameters.values():
            star = "*" if p.kind == p.VAR_POSITIONAL else "**" if p.kind == p.VAR_KEYWORD else ""
            out.append(star + p.name + ("=" if p.default is not p.empty else ""))
        if out and out[0] in ("self", "cls"):
            out = out[1:]
        return {tuple(out)}
    return None


def _stub_of_base(stub, b):
    """The stub holding base class `b`: this one, or another of the package's stubs (a base
    imported from it, as onnx.pyi's GraphModule(Module) from nn.pyi)."""
    if b in stub.classes:
        return stub
    for stubfile in sorted(set(STUBS.values())):
        other = Stub(ast.parse((SOURCE_DIR / "src" / "python" / "bitgrad" / stubfile).read_text()).body)
        if b in other.classes:
            return other
    return None


def _stub_class(stub, name):
    """A stub class with the names and functions of its bases (in this stub or another)."""
    c = stub.classes[name]
    merged = Stub([])
    for b in c.bases:
        owner = _stub_of_base(stub, b)
        if owner is not None:
            base = _stub_class(owner, b)
            merged.names |= base.names
            merged.functions.update(base.functions)
    merged.names |= c.names
    merged.functions.update(c.functions)
    return merged


def _own_members(cls):
    """Public members of a class beside those of Python's and pybind11's bases (object,
    Exception: no stub repeats them)."""
    inherited = set()
    for base in cls.__mro__[1:]:
        if base.__module__ == "builtins" or base.__name__ == "pybind11_object":
            inherited.update(dir(base))
    return {n for n in dir(cls) if _public(n) and n not in inherited}


def _compare_functions(where, module_fns, stub, problems):
    for name, obj in module_fns:
        want = _module_params(obj, name)
        have = stub.functions.get(name)
        if want is None or have is None:
            continue
        def bare(sigs):
            return {tuple(p.rstrip("=") for p in s) for s in sigs}

        # the names, overload by overload, and each of the module's defaults in some overload
        if bare(want) != bare(have) or not want <= have:
            problems.append("%s.%s: the module takes %s, the stub says %s" % (
                where, name, sorted(want), sorted(have)))


def _differences(modname, stubfile):
    mod = importlib.import_module(modname)
    stub = Stub(ast.parse((SOURCE_DIR / "src" / "python" / "bitgrad" / stubfile).read_text()).body)
    problems = []
    names = {n for n in dir(mod) if _public(n)
             and not (isinstance(getattr(mod, n), types.ModuleType) and not getattr(mod, n).__name__.startswith("bitgrad"))}
    stub_names = {n for n in stub.names if _public(n)}
    for n in sorted(names - stub_names):
        problems.append("%s.%s is in the module, not in %s" % (modname, n, stubfile))
    for n in sorted(stub_names - names):
        problems.append("%s.%s is in %s, not in the module" % (modname, n, stubfile))
    fns = [(n, getattr(mod, n)) for n in sorted(names & stub_names) if callable(getattr(mod, n))
           and not isinstance(getattr(mod, n), type)]
    _compare_functions(modname, fns, stub, problems)
    for cname in sorted(names & set(stub.classes)):
        cls = getattr(mod, cname)
        if not isinstance(cls, type):
            continue
        cstub = _stub_class(stub, cname)
        members = _own_members(cls)
        cnames = {n for n in cstub.names if _public(n)}
        where = "%s.%s" % (modname, cname)
        for n in sorted(members - cnames):
            problems.append("%s.%s is in the module, not in %s" % (where, n, stubfile))
        for n in sorted(cnames - members - set(dir(cls))):
            problems.append("%s.%s is in %s, not in the module" % (where, n, stubfile))
        methods = [(n, getattr(cls, n)) for n in sorted(members & cnames) if callable(getattr(cls, n, None))
                   and not isinstance(getattr(cls, n), type)]
        _compare_functions(where, methods, cstub, problems)
    return problems


@pytest.mark.parametrize("modname", sorted(STUBS))
def test_stub_matches_module(modname):
    problems = _differences(modname, STUBS[modname])
    assert not problems, "the stub differs from the module:\n  " + "\n  ".join(problems)
