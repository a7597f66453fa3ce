"""python3 -m bitgrad.torch: the same launcher as python3 -m bitgrad.torch.record."""
import sys

from bitgrad.torch._cli import main

sys.exit(main())
