"""python3 -m bitgrad.torch.record --out DIR [options] [--] SCRIPT [ARGS...]:
records an unmodified PyTorch training script into a bitgrad run directory (docs/torch.md)."""
import sys
import types

if __name__ == "__main__":
    from bitgrad.torch._cli import main

    sys.exit(main())
else:
    class _CallableModule(types.ModuleType):
        # importing this module makes it the package's attribute `record`, in place of the
        # function of that name: calling it still records
        def __call__(self, out_dir, *, every=1, max_pending=2, hashing="inline"):
            from bitgrad.torch._recorder import record

            return record(out_dir, every=every, max_pending=max_pending, hashing=hashing)

    sys.modules[__name__].__class__ = _CallableModule
