"""The Python code blocks of a Markdown page and the output each shows (the untagged block right
after it), run in order in one namespace, as a reader pastes them: tests/python/test_docs.py."""
import contextlib
import io
import re
import traceback


def blocks(text):
    """[(line, code, shown output or None)] of every ```python block of `text`."""
    lines = text.split("\n")
    out, i = [], 0
    while i < len(lines):
        if not lines[i].startswith("```"):
            i += 1
            continue
        lang, j = lines[i][3:].strip(), i + 1
        while j < len(lines) and not lines[j].startswith("```"):
            j += 1
        body = "\n".join(lines[i + 1:j])
        if lang == "python":
            out.append([i + 1, body, None])
        elif lang == "" and out and out[-1][2] is None and out[-1][0] + out[-1][1].count("\n") + 2 >= i - 2:
            out[-1][2] = body  # an output block right after a python block (a blank line between at most)
        i = j + 1
    return [tuple(b) for b in out]


def run(text, namespace=None):
    """Runs every block in order; [(line, code, shown, printed, error text or None)]. A block that
    raises prints what Python's top level would end with, `module.Type: message` (bitgrad's
    exceptions as `bitgrad.Type`), and its traceback is the error text."""
    ns = {} if namespace is None else namespace
    results = []
    for line, code, shown in blocks(text):
        buf = io.StringIO()
        err = None
        with contextlib.redirect_stdout(buf):
            try:
                exec(compile(code, "<block at line %d>" % line, "exec"), ns)
            except BaseException as e:  # noqa: B902 - the block's own failure is the result
                err = traceback.format_exc()
                mod = type(e).__module__
                mod = "bitgrad" if mod.startswith("bitgrad") else mod
                print("%s: %s" % (type(e).__name__ if mod == "builtins" else mod + "." + type(e).__name__, e))
        results.append((line, code, shown, buf.getvalue(), err))
    return results
