"""The run directory's checks, without torch: the launcher refuses a bad --out at once."""
import os

WHO = "bitgrad.torch.record"


def problem(out_dir):
    """Why out_dir cannot receive a new run, or None."""
    if os.path.exists(out_dir) and not os.path.isdir(out_dir):
        return "%s: %s is not a directory; expected a directory for the run" % (WHO, out_dir)
    for name in ("trace.jsonl", "manifest.json"):
        if os.path.exists(os.path.join(out_dir, name)):
            return "%s: %s already holds a run (%s); choose another directory" % (WHO, out_dir, name)
    return None
