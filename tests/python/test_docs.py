"""The docs cannot drift: every Python code block of docs/python.md and of the README runs, in
order in one interpreter as a reader pastes them, and prints exactly the output block the page
shows after it (a block that raises must show the exception it raises). What legitimately varies
between machines is replaced on both sides before comparing, each for the reason given."""
import json
import os
import re
import subprocess
import sys

import pytest

from conftest import SOURCE_DIR

# (pattern, replacement, why it varies)
VARYING = [
    (r"\b(avx512|avx2|scalar)\b", "<isa>", "the code path this CPU runs (the bits are the same on every one, T8)"),
    (r"interrupted at step \d+", "interrupted at step <n>", "when the timer's Ctrl-C lands: the machine's speed"),
    (r"matmul took [0-9.]+ s; the Python thread ticked \d+ times", "matmul took <s> s; the Python thread ticked <n> times",
     "a wall-clock time and what another thread did meanwhile"),
]


def normal(text):
    for pattern, repl, _ in VARYING:
        text = re.sub(pattern, repl, text)
    return text.rstrip("\n")


def run_page(page, tmp_path):
    """[(line, code, shown, printed, error)] of every block of `page`, run in a fresh interpreter in
    a scratch directory that sees the repository's examples/ (the blocks' relative paths)."""
    os.symlink(SOURCE_DIR / "examples", tmp_path / "examples")
    code = ("import json, sys; sys.path.insert(0, %r); import doc_blocks; "
            "r = doc_blocks.run(open(%r).read()); sys.stdout.write('\\n@@JSON@@' + json.dumps(r))"
            % (str(SOURCE_DIR / "tests" / "python"), str(SOURCE_DIR / page)))
    import bitgrad
    package = os.path.dirname(os.path.dirname(os.path.abspath(bitgrad.__file__)))  # the build's, as the suite imports it
    env = dict(os.environ, PYTHONPATH=package + os.pathsep + os.environ.get("PYTHONPATH", ""))
    p = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=600, env=env)
    assert p.returncode == 0 and "@@JSON@@" in p.stdout, p.stdout[-3000:] + p.stderr[-3000:]
    return json.loads(p.stdout.split("@@JSON@@", 1)[1])


@pytest.mark.parametrize("page", ["docs/python.md", "README.md"])
def test_every_block_runs_and_prints_what_the_page_shows(page, tmp_path):
    results = run_page(page, tmp_path)
    assert results, "no Python block found in %s" % page
    problems = []
    for line, code, shown, printed, err in results:
        where = "%s:%d" % (page, line)
        if shown is None:
            if err:
                problems.append("%s raised and the page shows no output:\n%s" % (where, err))
            continue
        if normal(printed) != normal(shown):
            problems.append("%s prints\n%s\nbut the page shows\n%s%s" % (where, printed, shown, "\n" + err if err else ""))
        if "the Python thread ticked" in printed:  # the block's point: the GIL is released during the call
            assert int(re.search(r"ticked (\d+) times", printed).group(1)) > 0, printed
    assert not problems, "\n\n".join(problems)


def test_the_block_reader_pairs_outputs_and_reports_exceptions():
    import doc_blocks
    page = "text\n\n```python\nprint(1)\n```\n\n```\n1\n```\n\n```sh\nls\n```\n\n```python\nraise ValueError('no')\n```\n"
    assert doc_blocks.blocks(page) == [(3, "print(1)", "1"), (15, "raise ValueError('no')", None)]
    r = doc_blocks.run(page)
    assert r[0][3] == "1\n" and r[0][4] is None
    assert r[1][3] == "ValueError: no\n" and "Traceback" in r[1][4]
