"""C++ temporaries that Cython declares at the top of a function (issue 23, round 10).

Cython gives every C++ value an expression produces (a ``std::string`` from
``dtype_name(...)``, a ``TensorView`` copy, a ``std::vector``) a temporary
variable declared at the top of the generated function.  Its constructor and
destructor then run on every call, even when only an error message on a cold
branch uses it: ~10 instructions and a line of code per call in a function on
a hot path.  The cure is to move the expression into a helper of its own, so
that only the calls that need the value pay for it.

``python tools/cxx_temporaries.py [DIR]`` cythonizes every module of
``src/dlpackarray`` (into DIR, or a temporary directory), as CMakeLists.txt
does, and prints one line per (module, function, type) it finds;
``tests/test_cxx_temporaries.py`` holds the list to the functions where the
value is used on every call or the function is cold, each with its reason.
"""

from __future__ import annotations

import pathlib
import re
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "src" / "dlpackarray"

# A generated function's definition line ("static int __pyx_f_..._name(args) {")
# and a temporary of a type with a constructor or destructor that does work:
# the standard library's (iterators and size types excepted: plain values) and
# the core's TensorView.  The core's other structs are trivial.
_FUNCTION = re.compile(r"^(?:static |CYTHON_INLINE )*[A-Za-z_].*?\b(__pyx_\w+)\(.*\) \{$")
_TEMPORARY = re.compile(r"^  ((?:std::|dla::TensorView\b)[^;]*?) __pyx_t_\d+;$")
_TRIVIAL = re.compile(r"::(?:size_type|iterator|const_iterator|difference_type)$")


def function_name(mangled: str, module: str) -> str:
    """The Cython-level name of a generated function of ``module``: the
    mangled prefix (kind, package and module) removed, as in
    ``__pyx_f_11dlpackarray_6_array__import_copy_of``; Cython's own helpers
    (conversions) keep their whole name."""
    prefix = re.match(rf"^__pyx_[a-z]+_11dlpackarray_{len(module)}{module}_", mangled)
    return mangled[prefix.end() :] if prefix else mangled


def scan(cpp: str, module: str) -> list[tuple[str, str]]:
    """(function, type) for each function-scope C++ temporary of a type that
    constructs or destroys something, in the generated C++ text ``cpp``."""
    found = []
    function = None
    for line in cpp.splitlines():
        m = _FUNCTION.match(line)
        if m:
            function = function_name(m.group(1), module)
            continue
        t = _TEMPORARY.match(line)
        if t and function is not None and not _TRIVIAL.search(t.group(1)):
            found.append((function, " ".join(t.group(1).split())))
    return found


def cythonize(module: str, out_dir: pathlib.Path) -> str:
    """The C++ text Cython generates for ``src/dlpackarray/<module>.pyx``,
    with CMakeLists.txt's options (those that change the code)."""
    out = out_dir / f"{module}.cpp"
    subprocess.run(
        [sys.executable, "-m", "cython", "--cplus", "-3", "-X", "binding=False",
         "-I", str(ROOT / "src"), "--module-name", f"dlpackarray.{module}",
         "-o", str(out), str(PACKAGE / f"{module}.pyx")],
        check=True, capture_output=True, text=True, cwd=ROOT,
    )  # fmt: skip
    return out.read_text()


def scan_package(out_dir: pathlib.Path) -> list[tuple[str, str, str]]:
    """(module, function, type) for every module of the package."""
    found = []
    for pyx in sorted(PACKAGE.glob("*.pyx")):
        module = pyx.stem
        found += [(module, f, t) for f, t in scan(cythonize(module, out_dir), module)]
    return found


def main(argv: list[str]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        out_dir = pathlib.Path(argv[0]) if argv else pathlib.Path(tmp)
        out_dir.mkdir(parents=True, exist_ok=True)
        for module, function, type_ in scan_package(out_dir):
            print(f"{module}.{function}: {type_}")


if __name__ == "__main__":
    main(sys.argv[1:])
