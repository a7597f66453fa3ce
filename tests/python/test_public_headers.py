"""The Python module reaches bitgrad only through the public headers (include/bitgrad/*.hpp), so
that a C++ user gets the API Python has: a source of src/python that includes a header of
src/ other than its own bind.hpp (train/session_parts.hpp, store/run_dir.hpp, ...) fails here, naming
the file, the line and the header. What it needs goes into a public header instead (the Session:
bitgrad/session.hpp; the default run directory: train::default_run_dir in bitgrad/train.hpp)."""
import pathlib
import re

from conftest import SOURCE_DIR

INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')


def test_python_sources_include_only_public_headers():
    src = pathlib.Path(SOURCE_DIR) / "src" / "python"
    public = pathlib.Path(SOURCE_DIR) / "include"
    sources = sorted(list(src.glob("*.cpp")) + list(src.glob("*.hpp")))
    assert sources, f"no sources in {src}"
    bad = []
    for f in sources:
        for n, line in enumerate(f.read_text().splitlines(), 1):
            m = INCLUDE.match(line)
            if not m:
                continue
            header = m.group(1)
            # the module's own headers (python/bind.hpp, python/pymodule.hpp) include only public ones: checked here too
            own = header.startswith("python/") and (src / header[len("python/"):]).is_file()
            if own or (header.startswith("bitgrad/") and (public / header).is_file()):
                continue
            bad.append(f"{f.relative_to(SOURCE_DIR)}:{n}: includes \"{header}\", not a public header (include/bitgrad/)")
    assert not bad, "\n".join(bad)
