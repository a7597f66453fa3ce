"""`bitgrad train` and `bitgrad diff` from Python, and a bitgrad.Session stepped by a Python loop.

    PYTHONPATH=build/python /usr/bin/python3 examples/python/train_and_diff.py [--steps N]

1. trains examples/fashion_mlp.toml twice (1 thread, loading on the training thread; 2 threads
   with 2 loader workers) into a temporary directory and compares the runs step by step;
2. steps a bitgrad.Session from Python and checks its fingerprint against the command line's;
3. trains the same configuration given as a dict, then a variant of it, and lets diff say where
   the variant parts from the file's run.
"""
import argparse
import os
import shutil
import subprocess
import tempfile

import bitgrad as bg

HERE = os.path.dirname(os.path.abspath(__file__))
CONFIG = os.path.normpath(os.path.join(HERE, "..", "fashion_mlp.toml"))


def cli_fingerprint(config, steps, out):
    """The fingerprint `bitgrad train` prints, when the command is built (None otherwise)."""
    exe = os.path.join(HERE, "..", "..", "build", "bin", "bitgrad")
    exe = exe if os.access(exe, os.X_OK) else shutil.which("bitgrad")
    if exe is None:
        return None
    run = subprocess.run([exe, "train", config, "--steps", str(steps), "--out", out, "--no-progress"],
                         check=True, capture_output=True, text=True)
    last = run.stdout.strip().splitlines()[-1]  # "fingerprint <32 hex digits>"
    return last.split()[1]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=200)
    args = p.parse_args()
    steps = args.steps

    with tempfile.TemporaryDirectory(prefix="bitgrad-runs-") as tmp:
        # ---- 1. two runs, other threads and workers, compared step by step ----------------------
        print(f"== bitgrad.train: {steps} steps of {os.path.relpath(CONFIG)}, twice")
        a = bg.train(CONFIG, steps=steps, out=os.path.join(tmp, "a"), threads=1, workers=0, quiet=True)
        b = bg.train(CONFIG, steps=steps, out=os.path.join(tmp, "b"), threads=2, workers=2, quiet=True)
        print(f"run a (1 thread, 0 workers):  loss {a['last_loss']:.6f}  fingerprint {a['fingerprint']}")
        print(f"run b (2 threads, 2 workers): loss {b['last_loss']:.6f}  fingerprint {b['fingerprint']}")
        print("\n== bitgrad.instruments.diff(a, b)")
        d = bg.instruments.diff(a["out_dir"], b["out_dir"])  # prints the CLI's report
        print("identical:", d["identical"])

        # ---- 2. the same training stepped from Python ------------------------------------------
        print(f"\n== bitgrad.Session: {steps} steps from a Python loop")
        s = bg.Session(CONFIG, threads=2)
        print("model", s.model)
        for _ in range(steps):
            rec = s.step()
            if rec["step"] % max(1, steps // 4) == 0:
                print(f"  step {rec['step']:4d}  epoch {rec['epoch']}  batch {rec['batch']:3d}  "
                      f"loss {rec['loss']:.6f}  lr {rec['lr']:.6f}")
        ev = s.evaluate()
        print(f"test accuracy {100 * ev['accuracy']:.2f}%  test loss {ev['loss']:.6f}")
        cli = cli_fingerprint(CONFIG, steps, os.path.join(tmp, "cli"))
        print("session fingerprint      ", s.fingerprint())
        if cli is not None:
            print("`bitgrad train` fingerprint", cli)
            print("same as the command line:", s.fingerprint() == cli)
        print("same as bitgrad.train:   ", s.fingerprint() == a["fingerprint"])

        # ---- 3. a configuration as a dict ------------------------------------------------------
        print("\n== a configuration given as a dict (the file's tables)")
        config = {
            "seed": 20261121,
            "data": {"dataset": "fashion-mnist", "normalize": True},
            "model": {"init": "kaiming_uniform",
                      "layers": [{"type": "flatten"},
                                 {"type": "linear", "out": 512}, {"type": "relu"},
                                 {"type": "linear", "out": 512}, {"type": "relu"},
                                 {"type": "linear", "out": 10}]},
            "train": {"batch_size": 128, "epochs": 1},
            "optimizer": {"type": "sgd", "lr": 0.05, "momentum": 0.9},
            "schedule": {"type": "cosine"},
        }
        print("same configuration hash as the file:", bg.Session(config).config.hash() == bg.load_config(CONFIG).hash())
        c = bg.train(config, steps=steps, out=os.path.join(tmp, "c"), threads=2, quiet=True)
        print("fingerprint", c["fingerprint"], "- the file's run:", c["fingerprint"] == a["fingerprint"])

        config["optimizer"]["nesterov"] = True  # a variant: where does it part from run a?
        v = bg.train(config, steps=steps, out=os.path.join(tmp, "nesterov"), threads=2, quiet=True)
        print("with nesterov = true: fingerprint", v["fingerprint"])
        d = bg.instruments.diff(a["out_dir"], v["out_dir"], quiet=True)
        print("diff says:")
        for line in d["text"].splitlines():
            if tmp not in line:  # the lines naming the temporary directories
                print("  " + line)


if __name__ == "__main__":
    main()
