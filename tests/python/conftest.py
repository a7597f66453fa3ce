"""Shared fixtures of the Python tests: the module under test (PYTHONPATH=build/python, set by
ctest), the CLI beside it and the source tree."""
import os
import pathlib

import pytest

SOURCE_DIR = pathlib.Path(os.environ.get("BITGRAD_SOURCE_DIR", pathlib.Path(__file__).resolve().parents[2]))
BITGRAD_BIN = os.environ.get("BITGRAD_BIN", str(SOURCE_DIR / "build" / "bin" / "bitgrad"))


@pytest.fixture
def source_dir():
    return SOURCE_DIR


@pytest.fixture
def cli():
    if not os.path.exists(BITGRAD_BIN):
        pytest.fail("the bitgrad CLI is not built at %s" % BITGRAD_BIN)
    return BITGRAD_BIN


@pytest.fixture(autouse=True)
def _restore_threads():
    import bitgrad

    n = bitgrad.get_num_threads()
    yield
    bitgrad.set_num_threads(n)
