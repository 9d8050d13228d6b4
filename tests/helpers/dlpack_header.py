"""Where an official DLPack ``dlpack.h`` is installed (apache-tvm-ffi ships the
1.3 header), so that our own declarations can be compiled against the
reference ones.  Located without importing the package that ships it.
"""

from __future__ import annotations

import importlib.util
import pathlib
import re
import site
import sysconfig


def header_version(header: pathlib.Path):
    text = header.read_text(errors="replace")
    major = re.search(r"#define\s+DLPACK_MAJOR_VERSION\s+(\d+)", text)
    minor = re.search(r"#define\s+DLPACK_MINOR_VERSION\s+(\d+)", text)
    return (int(major.group(1)), int(minor.group(1))) if major and minor else None


def _candidates():
    spec = importlib.util.find_spec("tvm_ffi")  # locates without importing
    if spec is not None and spec.submodule_search_locations:
        for loc in spec.submodule_search_locations:
            yield pathlib.Path(loc) / "include" / "dlpack" / "dlpack.h"
    roots = set(
        site.getsitepackages() + [site.getusersitepackages(), sysconfig.get_paths()["purelib"]]
    )
    for root in sorted(roots):
        yield from pathlib.Path(root).glob("*/include/dlpack/dlpack.h")
        yield from pathlib.Path(root).glob("*/3rdparty/dlpack/include/dlpack/dlpack.h")


def find_official_header():
    seen = {}
    for h in _candidates():
        if h.is_file():
            seen[h] = header_version(h)
            if seen[h] == (1, 3):
                return h, seen
    return None, seen
