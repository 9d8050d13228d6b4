"""``python -m dlpackarray ...`` in a child process that sees some modules as uninstalled.

The child (and every process it starts, through PYTHONPATH) loads a ``sitecustomize`` whose
import finder reports the hidden top-level modules missing and whose ``find_spec`` answers
None for them: the environment of a user who never installed them.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

_SITECUSTOMIZE = """
import importlib.util, sys
HIDDEN = {hide!r}
class Hide:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in HIDDEN:
            raise ModuleNotFoundError(name)
        return None
sys.meta_path.insert(0, Hide())
_orig = importlib.util.find_spec
def find_spec(name, package=None):
    if name.split(".")[0] in HIDDEN:
        return None
    return _orig(name, package)
importlib.util.find_spec = find_spec
"""


def run_dlpackarray(
    *args: str, hide: tuple[str, ...] = (), env: dict | None = None, tmp=None
) -> subprocess.CompletedProcess:
    """``python -m dlpackarray ARGS`` with ``hide`` uninstalled (``tmp``: a folder for the
    sitecustomize module, needed when ``hide`` is given)."""
    child_env = dict(os.environ)
    path = [p for p in sys.path if p]
    if hide:
        (tmp / "sitecustomize.py").write_text(textwrap.dedent(_SITECUSTOMIZE.format(hide=hide)))
        path.insert(0, str(tmp))
    child_env["PYTHONPATH"] = os.pathsep.join(path)
    child_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "dlpackarray", *args],
        capture_output=True,
        text=True,
        env=child_env,
        timeout=600,
    )
