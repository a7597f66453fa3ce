"""`pip install .` and `pip install -e .` in a virtual environment made with --system-site-packages
(Debian's NumPy and torch stay usable), offline: the in-tree build backend
(packaging/python/bitgrad_build.py) asks for no build requirements, builds the module with CMake
and writes the wheel itself. Here it reuses the build tree under test (BITGRAD_BUILD_DIR), so the
test takes seconds; `make pip-check` does the same from a fresh build tree. The installed module
gives the CLI's selftest fingerprint."""
import os
import pathlib
import subprocess
import sys

import pytest

from conftest import BITGRAD_BIN, SOURCE_DIR


def run(args, env=None, timeout=900):
    r = subprocess.run(args, capture_output=True, text=True, env=env, timeout=timeout)
    assert r.returncode == 0, "%s\n%s\n%s" % (" ".join(map(str, args)), r.stdout[-3000:], r.stderr[-3000:])
    return r.stdout


@pytest.fixture
def venv(tmp_path):
    v = tmp_path / "venv"
    r = subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(v)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip("no venv for %s (python3-venv): %s" % (sys.executable, r.stderr.strip()[-300:]))
    return v


def clean_env(build_dir):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL")}
    env.update(BITGRAD_BUILD_DIR=str(build_dir), PIP_DEFAULT_TIMEOUT="5", PIP_RETRIES="0", PIP_DISABLE_PIP_VERSION_CHECK="1",
               PIP_NO_CACHE_DIR="1")
    return env


def test_pip_install_and_editable_give_the_clis_fingerprint(venv, tmp_path):
    build_dir = pathlib.Path(BITGRAD_BIN).resolve().parents[1]
    env = clean_env(build_dir)
    cli = run([BITGRAD_BIN, "selftest"])
    want = [line.split()[1] for line in cli.splitlines() if line.startswith("fingerprint ")][0]
    probe = "import bitgrad, numpy; print(bitgrad.__file__); print(bitgrad.selftest()['fingerprint'])"
    py, pip = str(venv / "bin" / "python"), str(venv / "bin" / "pip")

    out = run([pip, "install", str(SOURCE_DIR)], env=env)
    assert "Successfully installed bitgrad-" in out, out
    where, got = run([py, "-c", probe], env=env).split()
    assert where.startswith(str(venv)), "installed into the environment: " + where
    assert got == want, "the installed module's selftest fingerprint is the CLI's"
    stubs = pathlib.Path(where).parent
    assert (stubs / "__init__.pyi").exists() and (stubs / "py.typed").exists(), "the stubs are installed"
    run([pip, "uninstall", "-y", "bitgrad"], env=env)

    out = run([pip, "install", "-e", str(SOURCE_DIR)], env=env)
    where, got = run([py, "-c", probe], env=env).split()
    assert where.startswith(str(build_dir / "python")), "editable: the build tree's package: " + where
    assert got == want
    run([pip, "uninstall", "-y", "bitgrad"], env=env)
    r = subprocess.run([py, "-c", "import bitgrad"], capture_output=True, text=True, env=env)
    assert r.returncode != 0, "uninstalled"


def test_the_wheel_records_every_file_it_holds(tmp_path):
    import base64
    import hashlib
    import zipfile
    sys.path.insert(0, str(SOURCE_DIR / "packaging" / "python"))
    try:
        import bitgrad_build
    finally:
        sys.path.pop(0)
    settings = {"BITGRAD_BUILD_DIR": str(pathlib.Path(BITGRAD_BIN).resolve().parents[1])}
    first_dir, second_dir = tmp_path / "first", tmp_path / "second"
    first_dir.mkdir()
    second_dir.mkdir()
    wheel = bitgrad_build.build_wheel(str(first_dir), config_settings=settings)
    with zipfile.ZipFile(first_dir / wheel) as z:
        names = z.namelist()
        record = z.read([n for n in names if n.endswith(".dist-info/RECORD")][0]).decode().splitlines()
        listed = {line.split(",")[0]: line.split(",")[1] for line in record}
        assert set(listed) == set(names)
        for n in names:
            if not n.endswith("RECORD"):
                digest = base64.urlsafe_b64encode(hashlib.sha256(z.read(n)).digest()).rstrip(b"=").decode()
                assert listed[n] == "sha256=" + digest, n
        assert any(n.startswith("bitgrad/_bitgrad.") and n.endswith(".so") for n in names)
        assert {"bitgrad/torch/__init__.py", "bitgrad/torch/record.py", "bitgrad/torch/replay.py"} <= set(names)  # subpackages too
        assert "Requires-Dist: numpy" in z.read([n for n in names if n.endswith("METADATA")][0]).decode()
    assert bitgrad_build.build_wheel(str(second_dir), config_settings=settings) == wheel
    assert (first_dir / wheel).read_bytes() == (second_dir / wheel).read_bytes(), "the wheel's bytes are a function of the build"
