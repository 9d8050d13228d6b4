"""Conformance reports of the CUDA producers, for a run on a GPU machine.

    PYTHONPATH=<dlpackarray install> python tools/gpu_conform.py --out DIR

writes DIR/gpu_conformance.json and DIR/gpu_conformance.md: for every subject below whose
library is installed, ``check_conformance(expr, isolate=True)`` (one child interpreter
per subject, reruns past a crashing probe; ``process.no-crash`` names the probe and
quotes the child's traceback), plus the versions of Python, the libraries and the
driver.  Nothing here needs a GPU to import; a subject without a usable GPU reports
its error like any other crash.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

SHAPE = "arange(12, dtype={dtype}).reshape(3, 4)"
TORCH = "torch." + SHAPE.format(dtype="torch.float32").replace(")", ", device='cuda')", 1)
CUPY = "__import__('cupy')." + SHAPE.format(dtype="'float32'")
NUMBA = (
    "__import__('numba.cuda', fromlist=['cuda']).to_device("
    "np." + SHAPE.format(dtype="np.float32") + ")"
)

#: (name, distributions that must be installed, expression)
SUBJECTS = (
    # Most telling first: a device lease may end before the last ones.
    ("CuPy", ("cupy",), CUPY),
    ("torch CUDA", ("torch",), TORCH),
    ("dlpackarray over torch CUDA", ("torch",), f"dla.DLPackArray({TORCH})"),
    # The first GPU run's JAX child (GPU backend) died (SIGSEGV) in a stream probe with
    # nothing said; the crash attribution names the probe now.
    ("JAX (default backend)", ("jax",), "jnp." + SHAPE.format(dtype="jnp.float32")),
    ("numba", ("numba", "numpy"), NUMBA),
    ("dlpackarray over CuPy", ("cupy",), f"dla.DLPackArray({CUPY})"),
    ("dlpackarray over numba", ("numba", "numpy"), f"dla.DLPackArray({NUMBA})"),
    ("JAX (JAX_PLATFORMS=cpu)", ("jax",), "jnp." + SHAPE.format(dtype="jnp.float32")),
    ("CuPy (strided view)", ("cupy",), CUPY + "[:, ::2]"),
    ("torch CUDA (strided view)", ("torch",), TORCH + "[:, ::2]"),
    ("JAX (JAX_PLATFORMS=cuda)", ("jax",), "jnp." + SHAPE.format(dtype="jnp.float32")),
)  # fmt: skip
#: Environment of a subject's child, where it needs one.
ENV = {
    "JAX (JAX_PLATFORMS=cpu)": {"JAX_PLATFORMS": "cpu"},
    "JAX (JAX_PLATFORMS=cuda)": {"JAX_PLATFORMS": "cuda"},
}

LIBRARIES = ("numpy", "torch", "cupy", "numba", "jax", "jaxlib", "pyarrow", "dlpackarray")
MODULES = {"cupy": "cupy", "torch": "torch", "numba": "numba", "jax": "jax", "numpy": "numpy"}


def _version(dist: str) -> str | None:
    for name in (dist, f"{dist}-cuda12x", f"{dist}-cuda13x"):
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def _driver() -> str:
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return f"nvidia-smi unavailable ({exc})"
    return out.stdout.strip() or out.stderr.strip()


def run(only: list[str] | None = None, partial: Path | None = None) -> dict:
    """``{"environment": ..., "subjects": {name: {expression, ok, counts, seconds,
    results: {rule: [status, message]}}}}``."""
    from dlpackarray.testing import check_conformance

    doc = {
        "environment": {
            "python": platform.python_version(),
            "platform": platform.platform(),
            "gpu": _driver(),
            "versions": {lib: _version(lib) for lib in LIBRARIES},
        },
        "subjects": {},
    }
    for name, needs, expr in SUBJECTS:
        if only and name not in only:
            continue
        missing = [m for m in needs if importlib.util.find_spec(MODULES[m]) is None]
        if missing:
            doc["subjects"][name] = {"expression": expr, "skipped": f"{missing} not installed"}
            continue
        print(f"{name}: {expr}", file=sys.stderr, flush=True)
        start = time.monotonic()
        saved = {k: os.environ.get(k) for k in ENV.get(name, {})}
        os.environ.update(ENV.get(name, {}))
        try:
            report = check_conformance(expr, isolate=True)
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
        doc["subjects"][name] = {
            "expression": expr,
            "environment": ENV.get(name, {}),
            "subject": report.subject,
            "ok": report.ok,
            "counts": report.counts(),
            "seconds": round(time.monotonic() - start, 1),
            "results": {r.rule.id: [r.status, r.message] for r in report.results},
        }
        if partial is not None:
            # A device lease can end mid-run: each finished subject is kept.
            partial.write_text(json.dumps(doc, indent=1) + "\n")
    return doc


def render(doc: dict) -> str:
    from dlpackarray.cli.conform import NOTES
    from dlpackarray.testing import RULES

    env = doc["environment"]
    lines = [
        "# CUDA conformance run",
        "",
        f"- Python {env['python']} on {env['platform']}",
        f"- GPU: {env['gpu']}",
        "- " + ", ".join(f"{k} {v}" for k, v in env["versions"].items() if v),
        "",
        "| subject | pass | fail | not applicable | no crash | seconds |",
        "|---|---|---|---|---|---|",
    ]
    for name, entry in doc["subjects"].items():
        if "skipped" in entry:
            lines.append(f"| {name} | skipped: {entry['skipped']} | | | | |")
            continue
        c = entry["counts"]
        crash = entry["results"].get("process.no-crash", ["?"])[0]
        lines.append(
            f"| {name} | {c['pass']} | {c['fail']} | {c['not-applicable']} | {crash} "
            f"| {entry['seconds']} |"
        )
    lines += ["", "## Failures", ""]
    for name, entry in doc["subjects"].items():
        for rule_id, (status, message) in entry.get("results", {}).items():
            if status != "fail":
                continue
            level = RULES[rule_id].level
            note = NOTES.get((name, rule_id), "")
            lines.append(
                f"- **{name}** `{rule_id}` [{level}]: {message}" + (f" {note}" if note else "")
            )
    lines += ["", "## Expressions", ""]
    lines += [f"- {name}: `{entry['expression']}`" for name, entry in doc["subjects"].items()]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=".", help="folder for gpu_conformance.{json,md}")
    parser.add_argument("--only", action="append", help="run only this subject (repeatable)")
    parser.add_argument("--list", action="store_true", help="list the subjects and exit")
    parser.add_argument(
        "--timeout", type=float, default=120.0, help="seconds per child before it is killed"
    )
    args = parser.parse_args(argv)
    from dlpackarray.testing import _isolate

    _isolate.TIMEOUT = args.timeout
    # A CUDA subject may crash on purpose (torch's stream=-2) and be rerun without that
    # probe: leave room for a few reruns of a full child.
    _isolate.TOTAL_TIMEOUT = max(_isolate.TOTAL_TIMEOUT, 4 * args.timeout)
    if args.list:
        for name, _, expr in SUBJECTS:
            print(f"{name}: {expr}")
        return 0
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    doc = run(args.only, out / "gpu_conformance.json")
    (out / "gpu_conformance.json").write_text(json.dumps(doc, indent=1) + "\n")
    (out / "gpu_conformance.md").write_text(render(doc))
    print(render(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
