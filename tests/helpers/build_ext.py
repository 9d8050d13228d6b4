"""Compiles the C test extensions in tests/helpers/extensions/ (lying_buffer.c
for the adversarial corpus, deleter_threads.c for the soak tests) with the
system C compiler.

A failing build raises (CalledProcessError): the corpus cases that need the
extension then fail instead of being skipped.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig

SOURCES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "extensions")


def build(folder: str, name: str = "lying_buffer") -> str:
    """Builds extension ``name`` (``name``.c) into ``folder``; returns the folder."""
    os.makedirs(folder, exist_ok=True)
    so = os.path.join(folder, name + sysconfig.get_config_var("EXT_SUFFIX"))
    cc = os.environ.get("CC", "cc")
    proc = subprocess.run(
        [
            cc,
            "-shared",
            "-fPIC",
            "-O1",
            "-g",
            "-Wall",
            "-Werror",
            f"-I{sysconfig.get_paths()['include']}",
            os.path.join(SOURCES, name + ".c"),
            "-pthread",
            "-o",
            so,
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"building {name} failed:\n{proc.stdout}\n{proc.stderr}")
    return folder


if __name__ == "__main__":
    print(build(sys.argv[1], *sys.argv[2:]))
