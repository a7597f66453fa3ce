"""The launcher: python3 -m bitgrad.torch.record --out DIR [options] [--] SCRIPT [ARGS...]"""
import os
import sys
import traceback

from bitgrad.torch import _rundir

USAGE = ("usage: python3 -m bitgrad.torch.record --out DIR [--every N] [--hashing inline|thread] [--max-pending N] "
         "[--threads N] [--workers N] [--keep-last] [--] SCRIPT [ARGS...]")
HELP = """
Runs SCRIPT unmodified, as `python3 SCRIPT ARGS...` would (sys.argv, __name__ == "__main__", the
script's directory first on sys.path), and records its PyTorch training into DIR: manifest.json
and trace.jsonl, one record per optimizer step, which `bitgrad diff` compares.

  --out DIR          the run directory (created; one that holds a run is refused)
  --every N          record every N-th optimizer step (default 1: every step)
  --hashing inline   hash the tensors at the step, without copies (default)
  --hashing thread   copy the tensors at the step, hash the copies on a background thread
  --max-pending N    with thread hashing, steps that may wait to be hashed before a step waits (default 2)
  --threads N        torch's thread count for the whole run; a torch.set_num_threads of the script's is
                     noted in manifest.json ("overridden", with its line) and N stays
  --workers N        every DataLoader's num_workers; the script's value is noted likewise
  --keep-last        also write last.safetensors: the last recorded step's loss, gradients and parameters
(bitgrad audit --torch runs the script with --threads, --workers and --keep-last.)

Exit status: the script's own; 2 when the command line, the script or DIR is unusable."""

_WHO = _rundir.WHO


class _Usage(Exception):
    pass


def _positive(option, text):
    try:
        v = int(text)
    except ValueError:
        v = 0
    if v < 1:
        raise _Usage("%s: expected a positive integer, got %r" % (option, text))
    return v


def _parse(argv):
    opts = {"out": None, "every": 1, "max_pending": 2, "hashing": "inline", "threads": None, "workers": None,
            "keep_last": False}
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--":
            i += 1
            break
        if a in ("-h", "--help"):
            return None
        if a == "--keep-last":
            opts["keep_last"] = True
            i += 1
            continue
        name, eq, value = a.partition("=")
        if name in ("--out", "--every", "--max-pending", "--hashing", "--threads", "--workers"):
            if not eq:
                if i + 1 >= len(argv):
                    raise _Usage("%s: expected a value" % name)
                i += 1
                value = argv[i]
            if name == "--out":
                if not value:
                    raise _Usage("--out: expected a directory")
                opts["out"] = value
            elif name == "--workers":
                try:
                    opts["workers"] = int(value, 10) if value.isascii() else -1
                except ValueError:
                    opts["workers"] = -1
                if opts["workers"] < 0:
                    raise _Usage("--workers: expected an integer from 0, got %r" % value)
            elif name == "--hashing":
                if value not in ("thread", "inline"):
                    raise _Usage("--hashing: expected inline or thread, got %r" % value)
                opts["hashing"] = value
            else:
                opts[name[2:].replace("-", "_")] = _positive(name, value)
        elif a.startswith("-") and a != "-":
            raise _Usage("unknown option %s; expected --out, --every, --hashing, --max-pending, --threads, --workers, "
                         "--keep-last or the script" % a)
        else:
            break
        i += 1
    rest = argv[i:]
    if opts["out"] is None:
        raise _Usage("--out DIR is required")
    if not rest:
        raise _Usage("expected the script to run after the options")
    return opts, rest[0], rest[1:]


def _print_script_traceback(e):
    """The traceback as `python3 SCRIPT` prints it: without the frames of this package (the
    launcher's, and the recorder's wrappers between the script's calls and PyTorch's)."""
    ours = os.path.dirname(os.path.abspath(__file__)) + os.sep
    seen = set()

    def trim(t):
        if t is None or id(t) in seen:
            return
        seen.add(id(t))
        t.stack = traceback.StackSummary.from_list([f for f in t.stack if not f.filename.startswith(ours)])
        trim(t.__cause__)
        trim(t.__context__)
        for sub in getattr(t, "exceptions", None) or ():
            trim(sub)

    te = traceback.TracebackException(type(e), e, e.__traceback__)
    trim(te)
    sys.stderr.write("".join(te.format()))


def _run_script(script):
    """Runs the file as `python3 SCRIPT` does: a fresh module __main__ with the absolute path as
    __file__ (and as the code's file name, which tracebacks show), sys.argv[0] as given."""
    import builtins
    import importlib.machinery
    import types

    path = os.path.abspath(script)
    with open(path, "rb") as f:
        source = f.read()
    code = compile(source, path, "exec", dont_inherit=True)
    main = types.ModuleType("__main__")
    main.__dict__.update(__file__=path, __cached__=None, __package__=None, __spec__=None, __builtins__=builtins,
                         __loader__=importlib.machinery.SourceFileLoader("__main__", path))
    sys.modules["__main__"] = main  # as for `python3 SCRIPT`: pickling and multiprocessing find the script's classes
    exec(code, main.__dict__)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        parsed = _parse(argv)
    except _Usage as e:
        print("%s\n%s: %s" % (USAGE, _WHO, e), file=sys.stderr)
        return 2
    if parsed is None:
        print(USAGE + "\n" + HELP)
        return 0
    opts, script, args = parsed
    if not os.path.isfile(script):
        what = "is a directory" if os.path.isdir(script) else "no such file"
        print("%s: cannot run %s: %s; expected a Python script" % (_WHO, script, what), file=sys.stderr)
        return 2
    why = _rundir.problem(opts["out"])
    if why is not None:
        print(why, file=sys.stderr)
        return 2
    # torch loads in seconds: after the checks that need nothing
    from bitgrad.torch._recorder import Recorder, _exit_info

    sys.argv = [script] + args
    if not sys.flags.safe_path:
        sys.path[0] = os.path.dirname(os.path.abspath(script))  # where `python3 SCRIPT` puts it
    rec = Recorder(opts["out"], every=opts["every"], max_pending=opts["max_pending"], hashing=opts["hashing"],
                   threads=opts["threads"], workers=opts["workers"], keep_last=opts["keep_last"])
    try:
        rec.start()
    except (ValueError, RuntimeError, OSError) as e:
        print(e, file=sys.stderr)
        return 2
    try:
        _run_script(script)
    except (SystemExit, KeyboardInterrupt) as e:
        rec._finish(_exit_info(e))
        raise
    except BaseException as e:
        rec._finish(_exit_info(e))
        _print_script_traceback(e)
        return 1
    rec._finish({"status": "completed"})
    if rec.error is not None:
        print("%s: %d steps recorded in %s before the recording stopped" % (_WHO, rec.recorded, rec.out_dir),
              file=sys.stderr)
    elif rec.steps:
        print("%s: %d optimizer steps, %d recorded in %s" % (_WHO, rec.steps, rec.recorded, rec.out_dir),
              file=sys.stderr)
    return 0
