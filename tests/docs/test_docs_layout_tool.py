"""tools/check_docs_layout.py (CI's browser check of the documentation site) tells a page
that fits the window from one that does not.

The criterion (``judge``) is checked on measurements made up to sit on each side of every
rule; with Chromium installed, the whole tool also runs on two small pages, one with a
wide table in the page and one with the same table in a scrolling box.
"""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location(
    "check_docs_layout", ROOT / "tools" / "check_docs_layout.py"
)
assert _spec is not None and _spec.loader is not None
layout = importlib.util.module_from_spec(_spec)
sys.modules["check_docs_layout"] = layout
_spec.loader.exec_module(layout)

W = 1265


def page(tables=(), doc=W, body=W) -> dict:
    return {
        "viewport": W,
        "document": {"scrollWidth": doc, "clientWidth": W},
        "body": {"scrollWidth": body, "clientWidth": W},
        "tables": list(tables),
    }


def box(left: float, right: float) -> dict:
    return {"left": left, "right": right, "width": right - left}


def table(left, right, clip=None, overflow="auto") -> dict:
    c = None if clip is None else {"overflow": overflow, "box": box(*clip), "tag": "div"}
    return {"box": box(left, right), "scrollWidth": right - left, "clip": c, "anchor": "s"}


@pytest.mark.parametrize(
    ("measured", "ok"),
    [
        (page(), True),
        (page(doc=W + 1), False),  # the page scrolls sideways
        (page(body=W + 1), False),
        (page([table(400, W)]), True),  # fits, no box
        (page([table(400, W + 0.4)]), True),  # rounding
        (page([table(400, W + 1)]), False),  # wider than the window, no box
        (page([table(-1, 600)]), False),  # starts left of the window
        (page([table(400, 2000, clip=(400, 1140))]), True),  # scrolls inside its box
        (page([table(400, 2000, clip=(400, 1140), overflow="scroll")]), True),
        (page([table(400, 2000, clip=(400, W + 5))]), False),  # the box overflows
        (page([table(400, 2000, clip=(400, 1140), overflow="hidden")]), False),  # cut off
        (page([table(400, 1100, clip=(400, 1140), overflow="clip")]), True),  # fits its box
    ],
)
def test_judge(measured: dict, ok: bool) -> None:
    failures, summary = layout.judge("p.html", measured)
    assert (not failures) == ok, failures
    assert summary.endswith("ok" if ok else "FAIL")


WIDE_TABLE = (
    "<table border=1><tr>" + "<td>column&nbsp;of&nbsp;a&nbsp;table</td>" * 40 + "</tr></table>"
)


@pytest.mark.skipif(
    not any(shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome")),
    reason="Chromium is not installed (Debian: apt-get install chromium)",
)
@pytest.mark.parametrize(
    ("body", "status"),
    [
        (f"<h1 id='s'>Wide</h1>{WIDE_TABLE}", 1),
        (f"<h1 id='s'>Wide</h1><div style='overflow-x: auto'>{WIDE_TABLE}</div>", 0),
    ],
)
def test_tool_in_chromium(tmp_path: Path, body: str, status: int) -> None:
    site = tmp_path / "site"
    site.mkdir()
    html = f"<!DOCTYPE html><html><head><meta charset='utf-8'></head><body>{body}</body></html>"
    (site / "index.html").write_text(html)
    # A search page whose results list links the expected entry, as Sphinx's would.
    (site / "search.html").write_text(
        "<!DOCTYPE html><html><body><ul class='search'><li><a href='api.html#x'>x</a></li>"
        "</ul></body></html>"
    )
    shots = tmp_path / "shots"
    argv = [str(site), "--pages", "index.html", "--screenshots", str(shots)]
    assert layout.main([*argv, "--search", "x", "api.html#x"]) == status
    assert (shots / "index.png").stat().st_size > 0
    assert (shots / "index-widest-table.png").stat().st_size > 0
