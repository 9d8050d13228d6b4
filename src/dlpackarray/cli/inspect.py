"""``python -m dlpackarray inspect EXPR|FILE.npy``: what DLPackArray and each consumer see.

EXPR is evaluated with common array modules importable by their usual names (``np``,
``torch``, ``jnp``, ``pa``, ``pl``, ``dla`` ...); a path ending in ``.npy`` is memory-mapped
read-only.  The report lists the protocols the object offers, the ``DLPackArray`` view of it
and, for every installed consumer of the interop matrix, whether it takes the view
zero-copy, and why not otherwise.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import sys
import textwrap
from collections.abc import Sequence

from dlpackarray.cli.matrix import _clean
from dlpackarray.cli.matrix_report import COPIED, REFUSED, ZERO_COPY
from dlpackarray.cli.packages import install_names

#: Names EXPR may use without importing them.
_MODULES = {
    "np": "numpy",
    "numpy": "numpy",
    "torch": "torch",
    "jax": "jax",
    "jnp": "jax.numpy",
    "pa": "pyarrow",
    "pyarrow": "pyarrow",
    "pl": "polars",
    "polars": "polars",
    "na": "nanoarrow",
    "nanoarrow": "nanoarrow",
    "duckdb": "duckdb",
    "ml_dtypes": "ml_dtypes",
    "tvm_ffi": "tvm_ffi",
    "array": "array",
    "ctypes": "ctypes",
    "mmap": "mmap",
    "dla": "dlpackarray",
    "dlpackarray": "dlpackarray",
}

#: Import precedence of DLPackArray (docs/protocols.rst), with how to detect each.
PROTOCOLS = (
    "__dlpack__",
    "__array_struct__",
    "__array_interface__",
    "__arrow_c_device_array__",
    "__arrow_c_array__",
    "__arrow_c_device_stream__",
    "__arrow_c_stream__",
    "buffer protocol",
    "__array__",
    "__cuda_array_interface__",
)


#: Consumers whose DLPack import drops the READ_ONLY flag (DLPack 1.0, ``DLPACK_FLAG_BITMASK_
#: READ_ONLY``: https://dmlc.github.io/dlpack/latest/c_api.html#c.DLPACK_FLAG_BITMASK_READ_ONLY)
#: and hands back a writable object over the same memory: a zero-copy import of read-only
#: data through them lets a write reach memory its owner treats as immutable.
IGNORES_READ_ONLY = {
    "torch": "zero-copy, but torch ignores read-only: writes would modify immutable memory",
    "tvm-ffi": "zero-copy, but tvm-ffi drops the read-only flag and re-exports the tensor "
    "writable: writes would modify immutable memory",
}

#: Width of the text report's lines; reasons wrap at word boundaries, never inside a word.
WIDTH = 100


def _reason(exc: BaseException) -> str:
    """The exception's type and first line, addresses masked, never shortened: the report
    is read by a person (the matrix's stored reasons are bounded, see matrix._clean)."""
    return _clean(f"{type(exc).__name__}: {exc}", limit=None)


def type_name(obj) -> str:
    """``module.qualname`` of ``obj``'s type; a type made by ``EXPR`` itself (a ctypes
    array type, a class) may have no ``__module__``."""
    kind = type(obj)
    module = getattr(kind, "__module__", None)
    name = getattr(kind, "__qualname__", None) or kind.__name__
    return f"{module}.{name}" if module else name


class _Namespace(dict):
    def __missing__(self, name):
        module = _MODULES.get(name)
        if module is None:
            raise KeyError(name)
        value = importlib.import_module(module)
        self[name] = value
        return value


def load(source: str):
    """The object named by ``source``: a ``.npy`` file (memory-mapped) or an expression."""
    if source.endswith(".npy"):
        np = importlib.import_module("numpy")
        return np.load(source, mmap_mode="r")
    return eval(source, {"__builtins__": __builtins__}, _Namespace())  # noqa: S307


def offered(obj) -> list[str]:
    out = []
    for name in PROTOCOLS:
        if name == "buffer protocol":
            try:
                memoryview(obj).release()
            except Exception:
                continue
            out.append(name)
        elif name == "__dlpack__" and type(obj).__name__ == "PyCapsule":
            out.append("DLPack capsule")
        elif hasattr(obj, name):
            out.append(name)
    return out


def _owner_chain(obj) -> list[str]:
    chain: list[str] = []
    seen: set[int] = set()
    while obj is not None and id(obj) not in seen and len(chain) < 8:
        seen.add(id(obj))
        chain.append(type_name(obj))
        nxt = None
        for attr in ("base", "obj", "_base"):
            try:
                nxt = getattr(obj, attr, None)
            except Exception:
                nxt = None
            if nxt is not None and not callable(nxt):
                break
            nxt = None
        obj = nxt
    return chain


def _extent(a) -> tuple[int, int]:
    """Lowest and one-past-highest byte offsets the view touches, from its first element."""
    if a.size == 0:
        return (0, 0)
    lo = sum(s * (n - 1) for s, n in zip(a.strides, a.shape, strict=True) if s < 0)
    hi = sum(s * (n - 1) for s, n in zip(a.strides, a.shape, strict=True) if s > 0)
    return (lo * a.itemsize, (hi + 1) * a.itemsize)


def _probe(consumer, a) -> dict:
    from dlpackarray.cli import matrix

    row = {"consumer": consumer.name, "call": consumer.call}
    if not matrix._installed(consumer.library):
        hint = " ".join(install_names([consumer.library]))
        return {**row, "status": "not installed", "reason": f"pip install {hint}"}
    # torch.from_dlpack aborts the interpreter on negative strides (docs/limitations.md):
    # say so instead of trying.
    if consumer.name == "torch" and any(s < 0 for s in a.strides) and a.size > 1:
        return {
            **row,
            "status": REFUSED,
            "reason": "torch aborts on negative strides: not tried (use a.copy() first)",
        }
    first = a.data_ptr + a.byte_offset
    try:
        _result, addr, _ = consumer.consume(a)
    except Exception as exc:
        return {**row, "status": REFUSED, "reason": _reason(exc)}
    if a.size == 0 or addr == first:
        note = IGNORES_READ_ONLY.get(consumer.name, "") if a.readonly and a.size else ""
        return {**row, "status": ZERO_COPY, "reason": note}
    return {**row, "status": COPIED, "reason": "the result does not share the memory"}


def inspect(source: str) -> dict:
    """The whole report as plain data (what ``--json`` prints)."""
    from dlpackarray import DLPackArray
    from dlpackarray.cli.matrix_cells import CONSUMERS

    obj = load(source)
    report: dict = {
        "source": source,
        "type": type_name(obj),
        "protocols": offered(obj),
        "owner_chain": _owner_chain(obj),
    }
    try:
        a = DLPackArray(obj)
    except Exception as exc:
        report.update(dlpackarray=None, error=_reason(exc), consumers=[])
        return report
    device_type, device_id = a.__dlpack_device__()
    try:
        from dlpackarray import DLDeviceType

        device = f"{DLDeviceType(device_type).name.lower()}:{device_id}"
    except ValueError:
        device = f"{device_type}:{device_id}"
    lo, hi = _extent(a)
    report["dlpackarray"] = {
        "shape": list(a.shape),
        "strides": list(a.strides),
        "dtype": str(a.dtype),
        "device": device,
        "readonly": bool(a.readonly),
        "nbytes": a.nbytes,
        "byte_extent": [lo, hi],
        "c_contiguous": bool(a.c_contiguous),
        "f_contiguous": bool(a.f_contiguous),
        "data_ptr": a.data_ptr,
        "byte_offset": a.byte_offset,
    }
    report["consumers"] = [_probe(c, a) for c in CONSUMERS]
    return report


def _wrap(text: str, head: str, indent: str) -> list[str]:
    """``head`` + ``text`` in lines of at most WIDTH characters, broken only between words
    (a word longer than a line stays whole), continued under ``indent``."""
    return textwrap.wrap(
        text,
        width=max(WIDTH, len(head) + 20),
        initial_indent=head,
        subsequent_indent=indent,
        break_long_words=False,
        break_on_hyphens=False,
    ) or [head.rstrip()]


def _consumer_lines(row: dict) -> list[str]:
    """One consumer's row: name, status and its reason, wrapped under the reason column."""
    head = f"  {row['consumer']:<11} {row['status']:<13} "
    return _wrap(row["reason"], head, " " * len(head))


def format_text(report: dict) -> str:
    lines = [
        f"{report['source']}: {report['type']}",
        f"  protocols:   {', '.join(report['protocols']) or 'none'}",
        f"  owner chain: {' -> '.join(report['owner_chain'])}",
    ]
    view = report.get("dlpackarray")
    if view is None:
        lines += _wrap(report["error"], "DLPackArray refuses it: ", "  ")
        return "\n".join(lines)
    lines += [
        "DLPackArray sees:",
        f"  shape {tuple(view['shape'])}, strides {tuple(view['strides'])} (elements), "
        f"dtype {view['dtype']}, device {view['device']}",
        f"  read-only {view['readonly']}, {view['nbytes']} bytes, byte extent "
        f"[{view['byte_extent'][0]}, {view['byte_extent'][1]}) from the first element, "
        f"C-contiguous {view['c_contiguous']}, F-contiguous {view['f_contiguous']}",
        "Consumers:",
    ]
    for row in report["consumers"]:
        lines += _consumer_lines(row)
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m dlpackarray inspect",
        description="Show the protocols an object offers, what DLPackArray sees and which "
        "installed consumers take it zero-copy.",
    )
    parser.add_argument(
        "source",
        help="a Python expression (np, torch, jnp, pa, ... preloaded) or a path to a .npy file",
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    args = parser.parse_args(argv)
    try:
        report = inspect(args.source)
    except Exception as exc:
        print(f"cannot evaluate {args.source!r}: {_reason(exc)}", file=sys.stderr)
        return 2
    print(json.dumps(report, indent=2) if args.json else format_text(report))
    return 0 if report.get("dlpackarray") is not None else 1
