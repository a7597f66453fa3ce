"""What decides a PyTorch run's numbers besides its script: the build, the threads, the
deterministic switches, the environment and the machine, as manifest.json sections."""
import json
import math
import os
import platform
import re
import sys

import torch

import bitgrad

# environment variables that change what PyTorch, its BLAS/OpenMP/oneDNN or CUDA compute (threads,
# code paths, algorithms), or Python's hashing; recorded when set
_ENV_PREFIXES = ("OMP_", "GOMP_", "KMP_", "MKL_", "OPENBLAS_", "GOTO_", "BLIS_", "VECLIB_", "NUMEXPR_", "DNNL_",
                 "ONEDNN_", "MKLDNN_", "ATEN_", "TORCH_", "PYTORCH_", "CUBLAS_", "CUBLASLT_", "CUDNN_", "CUDA_",
                 "NVIDIA_TF32", "BITGRAD_")
_ENV_NAMES = ("PYTHONHASHSEED", "LD_PRELOAD")


def json_safe(v, depth=0):
    """v as JSON: numbers, strings, booleans and None as they are (non-finite floats as the
    strings bitgrad's files use), sequences and string-keyed dicts recursively, a one-element
    tensor as its number, anything else as its repr."""
    if v is None or isinstance(v, (bool, str)):
        return v
    if isinstance(v, int):
        return int(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "NaN"
        if math.isinf(v):
            return "Infinity" if v > 0 else "-Infinity"
        return v
    numpy = sys.modules.get("numpy")
    if numpy is not None and isinstance(v, numpy.generic):
        return json_safe(v.item(), depth + 1)
    if isinstance(v, torch.Tensor) and v.numel() == 1 and depth < 8:
        return json_safe(v.item(), depth + 1)
    if isinstance(v, (list, tuple)) and depth < 8:
        return [json_safe(x, depth + 1) for x in v]
    if isinstance(v, dict) and depth < 8:
        return {str(k): json_safe(x, depth + 1) for k, x in v.items()}
    return repr(v)


def environment():
    return {k: v for k, v in sorted(os.environ.items()) if k.startswith(_ENV_PREFIXES) or k in _ENV_NAMES}


def _build_setting(config, key):
    m = re.search(r"\b%s=([^,\n]*)" % re.escape(key), config)
    return m.group(1).strip() if m else None


def settings():
    """The switches a script may change while it runs."""
    cudnn = torch.backends.cudnn
    return {
        "threads": torch.get_num_threads(),
        "interop_threads": torch.get_num_interop_threads(),
        "deterministic_algorithms": torch.are_deterministic_algorithms_enabled(),
        "deterministic_warn_only": torch.is_deterministic_algorithms_warn_only_enabled(),
        "cudnn_enabled": bool(cudnn.enabled),
        "cudnn_deterministic": bool(cudnn.deterministic),
        "cudnn_benchmark": bool(cudnn.benchmark),
        "cudnn_allow_tf32": bool(cudnn.allow_tf32),
        "matmul_allow_tf32": bool(torch.backends.cuda.matmul.allow_tf32),
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
        "default_dtype": str(torch.get_default_dtype()),
    }


def torch_section():
    config = torch.__config__.show()
    capability = re.search(r"CPU capability usage: (\S+)", config)
    cudnn_version = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    section = {
        "version": torch.__version__,
        "git_version": torch.version.git_version,
        "debug": bool(torch.version.debug),
        "cuda": torch.version.cuda,
        "cudnn": cudnn_version,
        "cpu_capability": capability.group(1) if capability else None,
        "blas": _build_setting(config, "BLAS_INFO"),
        "lapack": _build_setting(config, "LAPACK_INFO"),
        "mkl": torch.backends.mkl.is_available(),
        "mkldnn": torch.backends.mkldnn.is_available(),
        "openmp": torch.backends.openmp.is_available(),
        "config": config,
        "parallel_info": torch.__config__.parallel_info(),
    }
    section.update(settings())
    return section


def python_section():
    numpy = sys.modules.get("numpy")
    # a string's hash shows whether two runs hashed strings alike (PYTHONHASHSEED), which decides
    # the order of sets, and of dicts filled from them
    return {"version": platform.python_version(), "implementation": platform.python_implementation(),
            "executable": sys.executable, "numpy": getattr(numpy, "__version__", None),
            "hash_randomization": bool(sys.flags.hash_randomization), "str_hash": hash("bitgrad.torch")}


def machine_sections():
    """bitgrad's machine manifest (bitgrad, build, machine), for the CPU and the recorder's own
    build."""
    m = bitgrad.instruments.machine_manifest()
    return {k: m[k] for k in ("bitgrad", "build", "machine") if k in m}


def write_atomic(path, obj):
    """Writes JSON to path through a temporary file and a rename, so that a reader (or an
    interrupted run) sees the old manifest or the new one, never a part."""
    tmp = os.path.join(os.path.dirname(path) or ".", ".%s.tmp-%d" % (os.path.basename(path), os.getpid()))
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=2)
        f.write("\n")
    os.replace(tmp, path)
