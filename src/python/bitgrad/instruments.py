"""bitgrad.instruments: diff, audit, sensitivity, report, sample, read_metrics, machine_manifest.
Each returns its findings as Python objects."""
from . import _bitgrad as _b

globals().update({k: v for k, v in vars(_b.instruments).items() if not k.startswith("__")})


class StepTrace:
    """The step trace of a training loop written in Python: `out_dir/manifest.json`
    and `out_dir/trace.jsonl` with one record per step (fingerprints of the batch, the gradients
    and the updated parameters, and the loss's bits), which `diff` compares as a CLI run's.

        trace = bitgrad.instruments.StepTrace("runs/a", model)
        ... loss.backward(); opt.step()
        trace.step(step, loss, input=x)     # after the update, before zero_grad
        trace.close()

    diff of two such runs says where they part (replay=False: a Python run has no configuration
    to replay)."""

    def __init__(self, out_dir, model, *, meta=None):
        import json
        import os

        from . import _bitgrad as _top

        os.makedirs(out_dir, exist_ok=True)
        if os.path.exists(os.path.join(out_dir, "trace.jsonl")):
            raise _top.InputError("StepTrace: %s already holds a trace; choose another directory" % out_dir)
        self._dir = out_dir
        self._named = list(model.named_parameters())
        run = {"kind": "train", "model": repr(model).replace("\n", " "), "parameters": sum(p.numel() for _, p in self._named),
               "threads": _top.get_num_threads(), "seed": _top.initial_seed(), "source": "python"}
        run.update(meta or {})
        with open(os.path.join(out_dir, "manifest.json"), "w") as f:
            json.dump({"run": run, "machine": machine_manifest()}, f, indent=2)
        self._out = open(os.path.join(out_dir, "trace.jsonl"), "w")

    def step(self, step, loss, *, input=None, epoch=0, batch=0):
        """Records step `step` (an int): the loss (a tensor or a float, as float32 bits), the input
        batch's fingerprint, each parameter's gradient and value."""
        import json
        import struct

        from . import _bitgrad as _top

        value = loss.item() if isinstance(loss, _top.Tensor) else float(loss)
        bits = struct.unpack("<I", struct.pack("<f", value))[0]
        rec = {"step": int(step), "epoch": int(epoch), "batch": int(batch),
               "input": _top.fingerprint(input) if input is not None else "",
               "loss": "0x%08x" % bits,
               "grad": [[n, _top.fingerprint(p.grad) if p.grad is not None else ""] for n, p in self._named],
               "param": [[n, _top.fingerprint(p.detach())] for n, p in self._named]}
        self._out.write(json.dumps(rec) + "\n")
        self._out.flush()

    def close(self):
        self._out.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
