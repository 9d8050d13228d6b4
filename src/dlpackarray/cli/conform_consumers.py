"""The consumer half of ``python -m dlpackarray conform --write / --check DIR``.

DIR/conformance_consumers.json holds what ``check_consumer(expr, isolate=True)`` reports
for every installed consumer in :data:`SUBJECTS`; ``render`` adds its section to
DIR/conformance.md, under the producers' one.
"""

from __future__ import annotations

import importlib.util
import json

FILE = "conformance_consumers.json"

#: (row name, module to detect, consumer expression)
SUBJECTS = (
    ("NumPy np.from_dlpack", "numpy", "np.from_dlpack"),
    ("torch torch.from_dlpack", "torch", "torch.from_dlpack"),
    ("JAX jax.dlpack.from_dlpack", "jax", "jax.dlpack.from_dlpack"),
    ("tvm-ffi tvm_ffi.from_dlpack", "tvm_ffi", "tvm_ffi.from_dlpack"),
    ("dlpackarray from_dlpack", "dlpackarray", "dla.from_dlpack"),
    ("dlpackarray DLPackArray", "dlpackarray", "dla.DLPackArray"),
    ("pyarrow pa.array", "pyarrow", "lambda x: pa.array(x)"),
    ("pyarrow pa.chunked_array", "pyarrow", "lambda x: pa.chunked_array(x)"),
    ("pyarrow pa.table", "pyarrow", "lambda x: pa.table(x)"),
    ("polars pl.from_arrow", "polars", "pl.from_arrow"),
    ("DuckDB from_arrow", "duckdb", "lambda x: duckdb.from_arrow(x).to_arrow_table()"),
    ("nanoarrow na.Array", "nanoarrow", "na.Array"),
)

#: Why a consumer fails a rule: an upstream bug (with its tracker) or a permitted choice.
NOTES: dict[tuple[str, str], str] = {
    ("torch torch.from_dlpack", "consumer.dlpack.read-only"): (
        "**Deviation** (should): torch has no read-only tensors and imports a READ_ONLY "
        "tensor zero-copy as a writable one; the array API prefers ignoring the flag to "
        "raising, which leaves the user to not write "
        "(tracker: https://github.com/pytorch/pytorch/issues)."
    ),
    ("tvm-ffi tvm_ffi.from_dlpack", "consumer.dlpack.read-only"): (
        "**Bug**: through the DLPack C exchange API tvm-ffi drops the READ_ONLY flag of the "
        "managed tensor it is given and hands back a writable Tensor over the same memory "
        "(a write to read-only memory then crashes) "
        "(tracker: https://github.com/apache/tvm-ffi/issues)."
    ),
    ("tvm-ffi tvm_ffi.from_dlpack", "consumer.dlpack.device-asked"): (
        "**Deviation** (should): `__dlpack_device__` is not asked before `__dlpack__`."
    ),
    ("tvm-ffi tvm_ffi.from_dlpack", "consumer.dlpack.max-version"): (
        "**Outdated** (should): `__dlpack__` is called without `max_version`, so a "
        "producer's versioned capsule (and its READ_ONLY flag) is never asked for."
    ),
    ("NumPy np.from_dlpack", "consumer.dlpack.device-asked"): (
        "**Deviation** (should): `__dlpack_device__` is not asked before `__dlpack__` "
        "(NumPy imports CPU data only and reads the device from the capsule)."
    ),
    ("JAX jax.dlpack.from_dlpack", "consumer.dlpack.max-version"): (
        "**Outdated** (should): `__dlpack__` is called without `max_version`."
    ),
    ("JAX jax.dlpack.from_dlpack", "consumer.dlpack.copy-passed"): (
        "**Deviation** (should): `copy=` is taken but not passed on to `__dlpack__` "
        "(JAX copies on its own)."
    ),
    ("polars pl.from_arrow", "consumer.arrow.released-refused"): (
        "**Bug**: an `__arrow_c_array__` struct whose `release` is NULL (released: its "
        "buffers may be freed) is imported and read "
        "(tracker: https://github.com/pola-rs/polars/issues)."
    ),
    ("polars pl.from_arrow", "consumer.arrow.unknown-format"): (
        "**Bug**: an invalid format string panics in Rust (`PanicException`, a "
        "BaseException that `except Exception` does not catch) instead of raising "
        "(tracker: https://github.com/pola-rs/polars/issues)."
    ),
    ("polars pl.from_arrow", "consumer.arrow.bad-buffers"): (
        "**Bug**: an int64 array with one buffer panics in Rust (`PanicException`) instead "
        "of raising (tracker: https://github.com/pola-rs/polars/issues)."
    ),
    ("DuckDB from_arrow", "consumer.arrow.bad-buffers"): (
        "**Bug**: an int64 array claiming one buffer is read anyway (its `buffers[1]`, past "
        "the end the struct declares) instead of being refused "
        "(tracker: https://github.com/duckdb/duckdb/issues)."
    ),
}


def _installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def generate() -> dict:
    """``{row: {expression, version, ok, results: {rule id: [status, message]}}}``."""
    from dlpackarray.cli.conform import _version
    from dlpackarray.testing.consumer import check_consumer

    out = {}
    for name, module, expr in SUBJECTS:
        if not _installed(module):
            continue
        report = check_consumer(expr, isolate=True)
        out[name] = {
            "expression": expr,
            "version": _version("dlpackarray" if module == "dlpackarray" else name, module),
            "ok": report.ok,
            "results": {r.rule.id: [r.status, r.message] for r in report.results},
        }
    return out


def load(folder: str) -> dict:
    with open(f"{folder}/{FILE}") as f:
        return json.load(f)


def write(doc: dict, folder: str) -> None:
    with open(f"{folder}/{FILE}", "w") as f:
        json.dump(doc, f, indent=1, sort_keys=True)
        f.write("\n")


def differences(doc: dict, old: dict, not_compared: list[str] | None) -> list[str]:
    """Status differences between ``doc`` and the committed ``old``, for the producers'
    page and the consumers' alike; rows of another library version are not compared (they
    go to ``not_compared`` when a list is given)."""
    problems = []
    for lib, entry in doc.items():
        if lib not in old:
            problems.append(f"{lib}: not on the committed page")
            continue
        recorded = old[lib].get("version")
        if recorded is not None and recorded != entry.get("version"):
            if not_compared is not None:
                not_compared.append(f"{lib} {entry.get('version')} (the page has {recorded})")
            continue
        for rule_id, (status, _) in entry["results"].items():
            was = old[lib]["results"].get(rule_id, ["absent"])[0]
            if was != status:
                problems.append(f"{lib} {rule_id}: committed {was}, now {status}")
    return problems


def failure_lines(doc: dict, libs: list[str], level: dict, notes: dict) -> list[str]:
    """A line for each failed rule of each library (its level, the checker's message, the
    page's note on it), or "None." -- the failures section of both halves of the page."""
    out = []
    for lib in libs:
        for rule_id, (status, message) in doc[lib]["results"].items():
            if status == "fail":
                note = notes.get((lib, rule_id), "")
                out.append(
                    f"- **{lib}** `{rule_id}` [{level[rule_id]}]: {message}."
                    + (f" {note}" if note else "")
                )
    return out or ["None."]


def rule_tables(
    doc: dict, libs: list[str], rules: dict, results_heading: str, rules_heading: str
) -> list[str]:
    """The status of every rule for every library, then the rules themselves (statement,
    public reference): the two tables of both halves of the page."""
    mark = {"pass": "pass", "fail": "**FAIL**", "not-applicable": "-"}
    lines = [
        "",
        f"## {results_heading}",
        "",
        "| rule | level | " + " | ".join(libs) + " |",
        "|---|---|" + "---|" * len(libs),
    ]
    for rule_id, rule in rules.items():
        cells = [mark[doc[lib]["results"].get(rule_id, ["not-applicable"])[0]] for lib in libs]
        lines.append(f"| `{rule_id}` | {rule.level} | " + " | ".join(cells) + " |")
    lines += ["", f"## {rules_heading}", "", "| rule | level | statement | reference |"]
    lines.append("|---|---|---|---|")
    for rule_id, rule in rules.items():
        lines.append(f"| `{rule_id}` | {rule.level} | {rule.statement} | {rule.reference} |")
    return lines


def render(doc: dict) -> list[str]:
    """The consumers' section of conformance.md."""
    from dlpackarray.testing.consumer import RULES

    libs = list(doc)
    lines = [
        "",
        "# Conformance of consumers",
        "",
        "What `dlpackarray.testing.check_consumer` (see [testing](testing.md)) reports for "
        "each consumer installed when the page was generated: the checker hands it crafted "
        "producers that record every call and count every deleter / release call, and "
        "judges what it does.  A family whose valid baseline the consumer refuses is not "
        "applicable (`-`).",
        "",
        "| consumer | expression | must failures | should failures | passed | not applicable |",
        "|---|---|---|---|---|---|",
    ]
    level = {i: r.level for i, r in RULES.items()}
    level["process.no-crash"] = "must"
    for lib in libs:
        res = doc[lib]["results"]
        fails = [i for i, (s, _) in res.items() if s == "fail"]
        must = sum(1 for i in fails if level[i] == "must")
        passed = sum(1 for s, _ in res.values() if s == "pass")
        na = sum(1 for s, _ in res.values() if s == "not-applicable")
        lines.append(
            f"| {lib} | `{doc[lib]['expression']}` | {must} | {len(fails) - must} | "
            f"{passed} | {na} |"
        )
    lines += ["", "## Consumer failures", ""]
    lines += failure_lines(doc, libs, level, NOTES)
    lines += rule_tables(doc, libs, RULES, "Consumer results by rule", "Consumer rules")
    lines += ["", "## Consumer versions", ""]
    lines += [f"- {lib}: {doc[lib].get('version') or ''}".rstrip() for lib in libs]
    return lines
