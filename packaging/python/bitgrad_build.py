"""bitgrad's PEP 517 build backend (in the tree: pyproject.toml's backend-path), so that `pip install .`
and `pip install -e .` work offline with Debian's packages alone: it asks for no build requirements
(pip's isolated build environment then downloads nothing), builds the module with the system's CMake,
compiler, pybind11-dev and python3-dev for the interpreter running pip, and writes the wheel itself
(zipfile, the wheel format's METADATA, WHEEL and RECORD) with the module, its Python files and its
stubs. Where it builds: the config setting or environment variable BITGRAD_BUILD_DIR (a build tree
to reuse, as the tests do), else a fresh temporary one (a wheel), else build-pip/ in the source tree
(an editable install, which points at it and needs it afterwards)."""
import base64
import hashlib
import io
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NAME = "bitgrad"


def _version():
    text = open(os.path.join(ROOT, "include", "bitgrad", "version_number.hpp")).read()
    parts = [re.search(r"#define BITGRAD_VERSION_%s (\d+)" % k, text) for k in ("MAJOR", "MINOR", "PATCH")]
    if not all(parts):
        raise RuntimeError("bitgrad_build: cannot read the version from include/bitgrad/version_number.hpp")
    return ".".join(p.group(1) for p in parts)


def _metadata():
    return "\n".join([
        "Metadata-Version: 2.1",
        "Name: " + NAME,
        "Version: " + _version(),
        "Summary: Bitwise reproducible automatic differentiation and neural-network training",
        "Requires-Python: >=3.9",
        "Requires-Dist: numpy",
        "",
        "bitgrad: reverse-mode automatic differentiation and training whose every result is bitwise",
        "reproducible across runs, thread counts, batch splits, ranks and builds (docs/python.md).",
        ""])


def _tag():
    impl = "cp%d%d" % sys.version_info[:2]
    return "%s-%s-%s" % (impl, impl, re.sub(r"[-.]", "_", sysconfig.get_platform()))


def _setting(config_settings, key):
    if config_settings and config_settings.get(key):
        return config_settings[key]
    return os.environ.get(key)


def _build(build_dir):
    """Configures (once) and builds the module in build_dir; returns the package directory."""
    jobs = str(os.cpu_count() or 1)
    if not os.path.exists(os.path.join(build_dir, "CMakeCache.txt")):
        generator = ["-G", "Ninja"] if shutil.which("ninja") else []
        subprocess.run(["cmake", "-S", ROOT, "-B", build_dir] + generator +
                       ["-DCMAKE_BUILD_TYPE=Release", "-DBITGRAD_PYTHON=" + sys.executable, "-DBITGRAD_BUILD_TESTS=OFF",
                        "-DBITGRAD_BUILD_BENCH=OFF", "-DBITGRAD_BUILD_TOOLS=OFF", "-DBITGRAD_BUILD_EXAMPLES=OFF"],
                       check=True, stdout=sys.stderr)
    subprocess.run(["cmake", "--build", build_dir, "--target", "bitgrad_python", "-j", jobs], check=True, stdout=sys.stderr)
    package = os.path.join(build_dir, "python", NAME)
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    if not os.path.exists(os.path.join(package, "_bitgrad" + suffix)):
        raise RuntimeError("bitgrad_build: %s has no _bitgrad%s: the build tree was configured for another Python "
                           "(its BITGRAD_PYTHON); use a fresh BITGRAD_BUILD_DIR" % (package, suffix))
    return package


def _record_line(arcname, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "%s,sha256=%s,%d" % (arcname, digest, len(data))


def _write_wheel(wheel_directory, files):
    """files: (arcname, bytes) of the package; the dist-info is added. Returns the wheel's name."""
    dist_info = "%s-%s.dist-info" % (NAME, _version())
    wheel = "%s-%s-%s.whl" % (NAME, _version(), _tag())
    files = list(files) + [
        (dist_info + "/METADATA", _metadata().encode()),
        (dist_info + "/WHEEL", ("Wheel-Version: 1.0\nGenerator: bitgrad_build\nRoot-Is-Purelib: false\nTag: %s\n" % _tag()).encode()),
        (dist_info + "/top_level.txt", (NAME + "\n").encode())]
    record = [_record_line(a, d) for a, d in files] + [dist_info + "/RECORD,,"]
    files.append((dist_info + "/RECORD", ("\n".join(record) + "\n").encode()))
    tmp = os.path.join(wheel_directory, wheel + ".part")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as z:
        for arcname, data in sorted(files, key=lambda f: (f[0].startswith(dist_info), f[0])):
            info = zipfile.ZipInfo(arcname, date_time=(2026, 1, 1, 0, 0, 0))  # no clock in the wheel's bytes
            info.external_attr = (0o755 if arcname.endswith(".so") else 0o644) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)
    os.replace(tmp, os.path.join(wheel_directory, wheel))
    return wheel


# ---- the PEP 517 and PEP 660 hooks

def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    dist_info = "%s-%s.dist-info" % (NAME, _version())
    os.makedirs(os.path.join(metadata_directory, dist_info), exist_ok=True)
    with open(os.path.join(metadata_directory, dist_info, "METADATA"), "w") as f:
        f.write(_metadata())
    return dist_info


prepare_metadata_for_build_editable = prepare_metadata_for_build_wheel


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    given = _setting(config_settings, "BITGRAD_BUILD_DIR")
    build_dir = os.path.abspath(given) if given else tempfile.mkdtemp(prefix="bitgrad-wheel-")
    try:
        package = _build(build_dir)
        files = []
        # the package and its subpackages (bitgrad.torch), in a fixed order
        for top, dirs, names in os.walk(package):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            for name in sorted(names):
                path = os.path.join(top, name)
                if os.path.isfile(path) and not name.endswith(".pyc"):
                    with open(path, "rb") as f:
                        files.append((NAME + "/" + os.path.relpath(path, package).replace(os.sep, "/"), f.read()))
        return _write_wheel(wheel_directory, files)
    finally:
        if not given:
            shutil.rmtree(build_dir, ignore_errors=True)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    given = _setting(config_settings, "BITGRAD_BUILD_DIR")
    build_dir = os.path.abspath(given or os.path.join(ROOT, "build-pip"))
    package = _build(build_dir)
    # a .pth naming the build tree's package directory: edits under src/python/bitgrad reach it
    # with `cmake --build BUILD --target bitgrad_python` (or pip install -e . again)
    return _write_wheel(wheel_directory, [(NAME + "_editable.pth", (os.path.dirname(package) + "\n").encode())])


def build_sdist(sdist_directory, config_settings=None):
    base = "%s-%s" % (NAME, _version())
    name = base + ".tar.gz"
    skip = re.compile(r"^(\.git|build[^/]*|runs|__pycache__)$")
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz", format=tarfile.PAX_FORMAT) as tar:
        for top, dirs, files in os.walk(ROOT):
            dirs[:] = sorted(d for d in dirs if not skip.match(d))
            for f in sorted(files):
                path = os.path.join(top, f)
                tar.add(path, arcname=os.path.join(base, os.path.relpath(path, ROOT)), recursive=False)
        data = _metadata().encode()
        info = tarfile.TarInfo(base + "/PKG-INFO")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return name
