# Type stub of bitgrad.torch (src/python/bitgrad/torch/): recording a PyTorch training into a
# bitgrad run directory for `bitgrad diff`.
import os
from types import TracebackType
from typing import Literal, Optional, Sequence, Type, Union

import torch

class Recorder:
    # records the PyTorch training between start() and close(), or inside `with`
    def __init__(
        self,
        out_dir: Union[str, os.PathLike[str]],
        *,
        every: int = 1,
        max_pending: int = 2,
        hashing: Literal["thread", "inline"] = "inline",
        threads: Optional[int] = None,
        workers: Optional[int] = None,
        keep_last: bool = False,
    ) -> None: ...
    @property
    def out_dir(self) -> str: ...
    @property
    def every(self) -> int: ...
    @property
    def hashing(self) -> Literal["thread", "inline"]: ...
    @property
    def steps(self) -> int: ...
    @property
    def recorded(self) -> int: ...
    @property
    def error(self) -> Optional[str]: ...
    def start(self) -> Recorder: ...
    def close(self) -> None: ...
    def __enter__(self) -> Recorder: ...
    def __exit__(
        self, etype: Optional[Type[BaseException]], value: Optional[BaseException], tb: Optional[TracebackType]
    ) -> bool: ...

def record(
    out_dir: Union[str, os.PathLike[str]],
    *,
    every: int = 1,
    max_pending: int = 2,
    hashing: Literal["thread", "inline"] = "inline",
    threads: Optional[int] = None,
    workers: Optional[int] = None,
    keep_last: bool = False,
) -> Recorder: ...
def fingerprint(tensors: Union[torch.Tensor, Sequence[torch.Tensor]]) -> str: ...
