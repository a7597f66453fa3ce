"""python3 -m bitgrad.torch.replay RUN --step S --out DIR: runs a recorded PyTorch run's script
again up to step S with every op of that step traced (docs/torch.md; `bitgrad diff` calls it)."""
import sys

if __name__ == "__main__":
    from bitgrad.torch._replay import main

    sys.exit(main())
