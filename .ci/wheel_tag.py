"""The python and ABI tags of the wheel an interpreter builds, as ``PYTAG-ABITAG``.

    python .ci/wheel_tag.py              this interpreter, e.g. cp313-cp313
    python .ci/wheel_tag.py 3.13 t       a given version and ABI flags, e.g. cp313-cp313t

A free-threaded CPython (``Py_GIL_DISABLED``, ABI flag ``t``) builds ``cp313-cp313t``
wheels (https://packaging.python.org/en/latest/specifications/platform-compatibility-tags/
#abi-tag), so .ci/wheels matches ``-PYTAG-ABITAG-`` in a wheel's name: the default build's
wheel never stands in for the free-threaded one, nor the other way round.
"""

import sys
import sysconfig


def wheel_tags(major: int, minor: int, abiflags: str) -> str:
    if not set(abiflags) <= set("td"):
        raise SystemExit(f"CI: unknown ABI flags {abiflags!r} (expected '', 't', 'd' or 'td')")
    # Only the free-threading flag names a different ABI tag for CPython 3.8 and newer.
    suffix = "t" if "t" in abiflags else ""
    return f"cp{major}{minor}-cp{major}{minor}{suffix}"


if __name__ == "__main__":
    if len(sys.argv) == 3:
        major, minor = (int(p) for p in sys.argv[1].split("."))
        print(wheel_tags(major, minor, sys.argv[2]))
    elif len(sys.argv) == 1:
        flags = "t" if sysconfig.get_config_var("Py_GIL_DISABLED") else ""
        print(wheel_tags(sys.version_info[0], sys.version_info[1], flags))
    else:
        raise SystemExit("usage: python .ci/wheel_tag.py [MAJOR.MINOR ABIFLAGS]")
