"""The build tools a packaging test drives (cmake, ninja, ...), found where the
``reliability`` extra installs them: the running interpreter's own bin folder
first, then PATH.  A missing tool skips the test with the extra to install.
"""

from __future__ import annotations

import os
import shutil
import sys

import pytest


def tool(name: str) -> str:
    found = shutil.which(
        name, path=os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")])
    )
    if found is None:
        pytest.skip(f'{name} is not installed: pip install ".[reliability]"')
    return found
