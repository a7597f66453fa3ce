# Type stub of bitgrad.io (src/python/train.cpp): safetensors files with bitgrad's checksum.
from typing import Iterable, Mapping, Tuple, Union

from . import Tensor

def save_safetensors(
    path: str,
    tensors: Union[Mapping[str, Tensor], Iterable[Tuple[str, Tensor]]],
    metadata: Mapping[str, str] = {},
) -> None: ...
def load_safetensors(path: str, require_checksum: bool = False) -> Tuple[dict[str, Tensor], dict[str, str]]: ...
