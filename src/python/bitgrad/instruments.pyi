# Type stub of bitgrad.instruments (src/python/instruments.cpp): what reads and compares runs.
from typing import Any, Mapping, Optional, Sequence, TypedDict

from . import _ConfigLike

class _DiffResult(TypedDict):
    identical: bool
    text: str

class _ReportResult(TypedDict):
    runs: int
    plots: int
    path: str

class _SampleResult(TypedDict, total=False):
    text: str
    tokens: list[int]
    step: int
    logprobs: dict[str, Any]  # with logprobs=K: OpenAI's object, as `bitgrad serve` writes it

def diff(run_a: str, run_b: str, *, replay: bool = True, quiet: bool = False) -> _DiffResult: ...

# audit.json parsed, with "identical" (bool) and "out_dir" (str) added
def audit(
    config: _ConfigLike,
    *,
    threads: Sequence[int] = [1],
    workers: Sequence[int] = [0],
    accumulate: Sequence[int] = [1],
    steps: Optional[int] = None,
    runs: int = 0,
    out: str = "",
    quiet: bool = False,
) -> dict[str, Any]: ...

# sensitivity.json parsed, with "out_dir" (str) added
def sensitivity(
    config: _ConfigLike,
    *,
    members: int = 4,
    steps: Optional[int] = None,
    threads: int = 0,
    out: str = "",
    quiet: bool = False,
) -> dict[str, Any]: ...
def report(runs: Sequence[str], out_html: str, *, replace_any: bool = False) -> _ReportResult: ...
def sample(
    run_dir: str,
    *,
    prompt: str = "\n",
    tokens: int = 200,
    temperature: float = 1.0,
    top_k: int = 0,
    seed: int = 0,
    threads: int = 0,
    logprobs: Optional[int] = None,
) -> _SampleResult: ...
def machine_manifest() -> dict[str, Any]: ...
def read_metrics(run_dir: str) -> list[dict[str, Any]]: ...

class StepTrace:
    # the step trace of a training loop written in Python, for diff
    def __init__(self, out_dir: str, model: Any, *, meta: Optional[Mapping[str, Any]] = None) -> None: ...
    def step(self, step: int, loss: Any, *, input: Any = None, epoch: int = 0, batch: int = 0) -> None: ...
    def close(self) -> None: ...
    def __enter__(self) -> StepTrace: ...
    def __exit__(self, *exc: Any) -> None: ...
