"""``python -m dlpackarray conform EXPR [--json]``: conformance report of one producer.

``--write DIR`` / ``--check DIR`` generate or verify DIR/conformance.md and
DIR/conformance.json: the report of every installed library in :data:`SUBJECTS`, each run
in its own interpreter (``isolate=True``) so a crashing producer fails one row.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from collections.abc import Sequence

from dlpackarray.cli import conform_consumers as _consumers

#: (library, distribution to detect, expression, what it shows)
SUBJECTS = (
    (
        "dlpackarray",
        "numpy",
        "dla.DLPackArray(np.arange(12, dtype=np.float32).reshape(3, 4))",
        "float32 (3, 4)",
    ),
    ("NumPy", "numpy", "np.arange(12, dtype=np.float32).reshape(3, 4)", "float32 (3, 4)"),
    (
        "NumPy (read-only)",
        "numpy",
        "np.frombuffer(bytes(range(12)), dtype=np.uint8)",
        "uint8 (12,) over bytes",
    ),
    ("torch", "torch", "torch.arange(12, dtype=torch.float32).reshape(3, 4)", "float32 (3, 4)"),
    ("JAX", "jax", "jnp.arange(12, dtype=jnp.float32).reshape(3, 4)", "float32 (3, 4)"),
    ("pyarrow", "pyarrow", "pa.array([1, 2, 3], type=pa.int64())", "Int64Array"),
    ("polars", "polars", "pl.Series([1, 2, 3])", "Int64 Series"),
    ("nanoarrow", "nanoarrow", "na.c_array([1, 2, 3], na.int64())", "int64 CArray"),
    (
        "tvm-ffi",
        "tvm_ffi",
        "tvm_ffi.from_dlpack(np.arange(12, dtype=np.float32).reshape(3, 4))",
        "float32 (3, 4)",
    ),
    (
        "pydlpack",
        "dlpack",
        "__import__('dlpack').asdlpack(np.arange(12, dtype=np.float32).reshape(3, 4))",
        "float32 (3, 4)",
    ),
)


def _installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def _version(name: str, module: str) -> str | None:
    """The version of the library a row describes (its distribution's)."""
    if name == "dlpackarray":
        import dlpackarray

        return dlpackarray.__version__
    from dlpackarray.cli.selfcheck import _distribution_version

    return _distribution_version(module, module)


def generate() -> dict:
    """``{library: {expression, shows, version, ok, results: {rule id: [status, message]}}}``."""
    from dlpackarray.testing import check_conformance

    out = {}
    for name, module, expr, shows in SUBJECTS:
        if not (_installed(module) and _installed("numpy")):
            continue
        report = check_conformance(expr, isolate=True)
        out[name] = {
            "expression": expr,
            "shows": shows,
            "version": _version(name, module),
            "ok": report.ok,
            "results": {r.rule.id: [r.status, r.message] for r in report.results},
        }
    return out


#: Why a library fails a rule: an upstream bug (with its tracker) or a spec-permitted choice.
NOTES: dict[tuple[str, str], str] = {
    ("torch", "dlpack.copy.true-is-copied"): (
        "**Bug**: `Tensor.__dlpack__(copy=True)` exports a fresh clone but leaves "
        "DLPACK_FLAG_BITMASK_IS_COPIED clear, so a consumer cannot tell it owns the data "
        "(no upstream issue found; tracker: https://github.com/pytorch/pytorch/issues)."
    ),
    ("JAX", "dlpack.capsule-name.versioned"): (
        "**Spec-permitted deviation**: JAX exports DLPack 0.x only; a producer may answer "
        "`max_version` with an older version and consumers must check the capsule name "
        "(every consumer's fallback)."
    ),
    ("JAX", "dlpack.deleter.via-struct"): (
        "**Spec-permitted deviation** (should): XLA's capsule destructor runs its deleter "
        "function directly rather than through the struct's `deleter` field; the cleanup "
        "is the same."
    ),
    ("tvm-ffi", "dlpack.max-version.older-major"): (
        "**Bug**: the legacy export path for an older major raises AttributeError instead "
        "of returning a legacy capsule or BufferError "
        "(tracker: https://github.com/apache/tvm-ffi/issues)."
    ),
    ("tvm-ffi", "dlpack.copy.true-new-memory"): (
        '**Missing feature**: `copy=True` raises BufferError("copy not yet supported"); '
        "the spec requires the producer to copy."
    ),
    ("tvm-ffi", "dlpack.stream.cpu-none-only"): (
        "**Deviation** (should): a CPU tensor accepts `stream=2` silently."
    ),
    ("pyarrow", "arrow.device-array.reserved-zero"): (
        "**Bug**: `Array.__arrow_c_device_array__` leaves the ArrowDeviceArray's `reserved` "
        "bytes uninitialised (the struct comes from malloc; the checker's heap poisoning "
        "shows 0xA5.. there), and the C Device Data Interface requires the producer to zero "
        "them (no upstream issue found; tracker: https://github.com/apache/arrow/issues)."
    ),
    ("nanoarrow", "arrow.requested-schema.own"): (
        "**Deviation** (should): `CArray.__arrow_c_array__` raises NotImplementedError for "
        "any non-None `requested_schema`, its own schema included; requests are best-effort "
        "and a producer that does not convert may return its default representation instead "
        "(tracker: https://github.com/apache/arrow-nanoarrow/issues)."
    ),
    ("pydlpack", "dlpack.export.repeatable"): (
        "**Bug**: an `asdlpack` object exports once; the next `__dlpack__` raises KeyError "
        "(tracker: https://github.com/pearu/pydlpack/issues); later DLPack rules are not "
        "reached."
    ),
    # CUDA subjects of tools/gpu_conform.py (a GPU run; not on the generated page).
    ("CuPy", "dlpack.copy.true-new-memory"): (
        '**Missing feature**: a CUDA array refuses `copy=True` with BufferError("copy=True '
        'only supported for copy to CPU") (CuPy 14.2); the spec requires the producer to copy.'
    ),
    ("CuPy", "dlpack.stream.cuda-zero-rejected"): (
        "**Deviation** (should): `stream=0` is taken as the legacy default stream (with a "
        "warning) instead of being refused as ambiguous."
    ),
    ("torch CUDA", "dlpack.stream.below-minus-one-rejected"): (
        "**Bug**: `Tensor.__dlpack__` turns any stream other than None, -1, 0, 1 and 2 into "
        "`torch.cuda.ExternalStream(stream)` (torch/_tensor.py) and waits on it, so "
        "`stream=-2` becomes the handle 0xff..fe; the isolated child is expected to die "
        "there (process.no-crash names the probe)."
    ),
    ("pydlpack", "dlpack.keywords.accepted"): (
        "**Outdated**: pydlpack 0.2's `__dlpack__` predates the 2023.12 keywords "
        "(`max_version`, `dl_device`, `copy`)."
    ),
}


def render(doc: dict, consumers: dict | None = None) -> str:
    """conformance.md: the producers' reports, then the consumers' (when given)."""
    from dlpackarray.testing import RULES

    libs = list(doc)
    lines = [
        "# Conformance of array libraries",
        "",
        "<!-- generated by `python -m dlpackarray conform --write docs`; "
        "checked by tests/testing/test_conform_docs.py -->",
        "",
        "What `dlpackarray.testing.check_conformance` (see [testing](testing.md)) reports for "
        "one export of each library installed when the page was generated.  `pass` / "
        "**FAIL** / `-` (not applicable: protocol not offered or rule not reached).",
        "",
        "| library | object | must failures | should failures | passed | not applicable |",
        "|---|---|---|---|---|---|",
    ]
    for lib in libs:
        res = doc[lib]["results"]
        must = [i for i, (s, _) in res.items() if s == "fail" and RULES[i].level == "must"]
        should = [i for i, (s, _) in res.items() if s == "fail" and RULES[i].level == "should"]
        passed = sum(1 for s, _ in res.values() if s == "pass")
        na = sum(1 for s, _ in res.values() if s == "not-applicable")
        lines.append(
            f"| {lib} | `{doc[lib]['shows']}` | {len(must)} | {len(should)} | {passed} | {na} |"
        )
    lines += ["", "## Failures", ""]
    lines += _consumers.failure_lines(doc, libs, {i: r.level for i, r in RULES.items()}, NOTES)
    lines += _consumers.rule_tables(doc, libs, RULES, "Results by rule", "Rules")
    lines += ["", "## Expressions", ""]
    lines += [
        f"- {lib} {doc[lib].get('version') or ''}".rstrip() + f": `{doc[lib]['expression']}`"
        for lib in libs
    ]
    if consumers is not None:
        lines += _consumers.render(consumers)
    return "\n".join(lines) + "\n"


def check(
    doc: dict,
    folder: str,
    not_compared: list[str] | None = None,
    consumers: dict | None = None,
) -> list[str]:
    """Differences between ``doc`` and DIR/conformance.json (statuses only).

    A library installed in another version than the page records is not
    compared (its behaviour may differ by right); its name and both versions
    go to ``not_compared`` when a list is given.
    """
    try:
        with open(f"{folder}/conformance.json") as f:
            old = json.load(f)
    except OSError as exc:
        return [str(exc)]
    problems = _consumers.differences(doc, old, not_compared)
    try:
        old_consumers = _consumers.load(folder)
    except OSError as exc:
        return [*problems, str(exc)]
    if consumers is not None:
        problems += _consumers.differences(consumers, old_consumers, not_compared)
    with open(f"{folder}/conformance.md") as f:
        if f.read() != render(old, old_consumers):
            problems.append(
                f"conformance.md is not the rendering of conformance.json and {_consumers.FILE}"
            )
    return problems


def main(argv: Sequence[str] | None = None) -> int:
    import argparse

    global _STARTED_PID
    _STARTED_PID = os.getpid()

    parser = argparse.ArgumentParser(
        prog="python -m dlpackarray conform",
        description="Check a producer's exports against the protocol rules "
        "(dlpackarray.testing); exit status 0 when conformant, 1 when not.",
    )
    parser.add_argument("expr", nargs="?", help="expression naming the object (like inspect)")
    parser.add_argument(
        "--consumer",
        metavar="EXPR",
        help="check a consumer instead: EXPR names a callable taking the producer "
        "(torch.from_dlpack, 'lambda x: pa.array(x)')",
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--protocols", help="comma-separated protocol families")
    parser.add_argument("--isolate", action="store_true", help="probe in a child interpreter")
    parser.add_argument("--write", metavar="DIR", help="write DIR/conformance.{json,md}")
    parser.add_argument("--check", metavar="DIR", help="verify DIR/conformance.{json,md}")
    # The isolated child's side of check_conformance(isolate=True) (testing/_isolate.py).
    parser.add_argument("--trace", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--skip", default="", help=argparse.SUPPRESS)
    parser.add_argument("--report-file", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.write or args.check:
        doc = generate()
        consumers = _consumers.generate()
        if args.write:
            with open(f"{args.write}/conformance.json", "w") as f:
                json.dump(doc, f, indent=1, sort_keys=True)
                f.write("\n")
            _consumers.write(consumers, args.write)
            sort = json.loads(json.dumps(doc, sort_keys=True))
            with open(f"{args.write}/conformance.md", "w") as f:
                f.write(render(sort, _consumers.load(args.write)))
            return 0
        skipped: list[str] = []
        problems = check(doc, args.check, skipped, consumers)
        for p in problems:
            print(p, file=sys.stderr)
        for lib in skipped:
            print(f"not compared, another version installed: {lib}", file=sys.stderr)
        if problems:
            print(
                f"the committed page in {args.check} is stale: run `python -m dlpackarray "
                f"conform --write {args.check}` and commit the result",
                file=sys.stderr,
            )
            return 1
        print(f"{args.check}/conformance.md is up to date", file=sys.stderr)
        return 0
    if args.consumer is not None:
        if args.expr:
            parser.error("give either EXPR or --consumer EXPR, not both")
        return _consumer_main(args)
    if not args.expr:
        parser.error("EXPR is required (or --consumer EXPR, or --write/--check DIR)")
    from dlpackarray.cli.inspect import load
    from dlpackarray.cli.matrix import _reason
    from dlpackarray.testing import _families, check_conformance

    try:
        protocols = _families(args.protocols.split(",")) if args.protocols else None
    except ValueError as exc:
        print(f"--protocols: {exc}", file=sys.stderr)
        return 2
    if args.trace:
        # The isolated child: a producer that fails to load is the parent's to report.
        report = _traced(args.expr, protocols, [t for t in args.skip.split(",") if t])
        return _emit(report, args)
    # A usage error (the expression does not evaluate, the .npy file is missing) is exit
    # status 2 with one line, as `inspect` does; 1 means "evaluated, not conformant".
    try:
        if args.isolate:
            if not args.expr.endswith(".npy"):
                compile(args.expr, "<EXPR>", "eval")
            report = check_conformance(args.expr, protocols=protocols, isolate=True)
        else:
            obj = load(args.expr)
    except Exception as exc:  # noqa: BLE001 - one line, no traceback
        print(f"cannot evaluate {args.expr!r}: {_reason(exc)}", file=sys.stderr)
        return 2
    if not args.isolate:
        report = check_conformance(obj, protocols=protocols)
    return _emit(report, args)


def load_consumer(expr: str):
    """The callable ``expr`` names.  The usual module names (``np``, ``pa``, ``pl`` ...) are
    imported up front into the expression's globals: a lambda looks its names up there when
    it is called, not in the mapping ``eval`` resolved the expression itself with."""
    from dlpackarray.cli.inspect import _MODULES, _Namespace

    code = compile(expr, "<EXPR>", "eval")
    names: set[str] = set()
    todo = [code]
    while todo:
        c = todo.pop()
        names.update(c.co_names)
        todo.extend(k for k in c.co_consts if hasattr(k, "co_names"))
    namespace = _Namespace()
    env = {"__builtins__": __builtins__}
    for name in sorted(names & set(_MODULES)):
        env[name] = namespace[name]
    return eval(code, env)  # noqa: S307


def _consumer_main(args) -> int:
    """``conform --consumer EXPR``: the same output and exit statuses as for a producer."""
    from dlpackarray.cli.matrix import _reason
    from dlpackarray.testing import consumer

    expr = args.consumer
    try:
        names = consumer.families(args.protocols.split(",")) if args.protocols else None
    except ValueError as exc:
        print(f"--protocols: {exc}", file=sys.stderr)
        return 2
    if args.trace:
        import faulthandler

        from dlpackarray.testing import report as _report

        faulthandler.enable(all_threads=False)
        _report.TRACE = sys.stderr
        _report.note("load", None, f"evaluating {expr}")
        skip = [t for t in args.skip.split(",") if t]
        return _emit(consumer.check(load_consumer(expr), names, skip, subject=expr), args)
    try:
        if args.isolate:
            compile(expr, "<EXPR>", "eval")
            report = consumer.check_consumer(expr, families=names, isolate=True)
        else:
            consume = load_consumer(expr)
            if not callable(consume):
                raise TypeError(f"{type(consume).__name__} is not callable")
    except Exception as exc:  # noqa: BLE001 - one line, no traceback
        print(f"cannot evaluate {expr!r}: {_reason(exc)}", file=sys.stderr)
        return 2
    if not args.isolate:
        report = consumer.check(consume, names, subject=expr)
    return _emit(report, args)


def _emit(report, args) -> int:
    """Print the report; the exit status: 0 conformant, 1 not."""
    text = report.to_json() if args.json else str(report)
    if args.report_file:
        # Only the interpreter the parent started writes its result: a producer that
        # forks inside a probe leaves a second copy of this process running the checker.
        if os.getpid() == _STARTED_PID:
            with open(args.report_file, "w") as f:
                f.write(text)
    else:
        print(text)
    sys.stdout.flush()  # before a crash at interpreter exit can lose it
    return 0 if report.ok else 1


#: The process ``main`` ran in (see ``_emit``).
_STARTED_PID = -1


def _traced(expr: str, protocols, skip):
    """Probe announcements and a crash's Python traceback (this thread's) on stderr."""
    import faulthandler

    from dlpackarray.cli.inspect import load
    from dlpackarray.testing import _check, report

    faulthandler.enable(all_threads=False)
    report.TRACE = sys.stderr
    report.note("load", None, f"evaluating {expr}")
    return _check(load(expr), protocols, skip)
