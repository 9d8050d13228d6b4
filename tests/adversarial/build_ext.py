"""Compiles tests/adversarial/lying_buffer.c with the system C compiler.

A failing build raises (CalledProcessError): the corpus cases that need the
extension then fail instead of being skipped.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig

SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "lying_buffer.c")


def build(folder: str) -> str:
    """Builds lying_buffer into ``folder`` and returns the folder."""
    os.makedirs(folder, exist_ok=True)
    so = os.path.join(folder, "lying_buffer" + sysconfig.get_config_var("EXT_SUFFIX"))
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
            SOURCE,
            "-o",
            so,
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"building lying_buffer failed:\n{proc.stdout}\n{proc.stderr}")
    return folder


if __name__ == "__main__":
    print(build(sys.argv[1]))
