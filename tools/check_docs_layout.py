"""Render pages of the built documentation site in headless Chromium and check that no
table, and no page, is wider than the browser window.

Usage::

    python tools/check_docs_layout.py SITE_DIR [--screenshots DIR] [--width 1280]
                                      [--pages index.html api.html interop.html]

``SITE_DIR`` is the output of ``sphinx-build -b html docs SITE_DIR``.  Each page is opened
from a copy of the site (the input is not modified) with a probe script added, in a window
``--width`` CSS pixels wide (900 high), and measured after the ``load`` event.  Chromium is
found as ``$CHROMIUM``, else ``chromium``, ``chromium-browser`` or ``google-chrome`` on
PATH (Debian: ``apt-get install chromium``); nothing else is needed (standard library only).

The criterion, per page; ``W`` is the viewport's width, ``document.documentElement.
clientWidth`` (the window less a vertical scroll bar), and every box is the element's
``getBoundingClientRect()``:

1. The page does not scroll sideways: ``scrollWidth <= clientWidth`` for
   ``document.documentElement`` and for ``document.body``.
2. Every rendered table (width > 0) is visible within ``[0, W]``.  Its *clip box* is the
   nearest of the table itself and its ancestors whose computed ``overflow-x`` is not
   ``visible``:

   * ``auto`` or ``scroll`` (a scrolling wrapper): the table may be wider than ``W``, since
     it scrolls inside that box, but the box must lie within ``[0, W]``;
   * ``hidden`` or ``clip``: the table must lie within the box (nothing cut off) and the
     box within ``[0, W]``;
   * none: the table itself must lie within ``[0, W]``.

   Half a pixel of rounding is allowed on each edge.

Search: ``search.html?q=QUERY`` (``--search``, default ``from_dlpack``), searched in the
browser with the built ``searchindex.js``, must list a result linking the given page
(default ``api.html#dlpackarray.from_dlpack``).

The exit status is 1 when a page fails (each failure is printed with its widths) or the
search finds nothing, 2 when Chromium or a page is missing.  With ``--screenshots DIR``,
``DIR/<page>.png`` is the top of each page, ``DIR/<page>-widest-table.png`` the section
holding its widest table brought to the top, and ``DIR/search.png`` the search's results,
all at the same window size, for a person to look at.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from urllib.parse import quote

DEFAULT_PAGES = ("index.html", "api.html", "interop.html")
HEIGHT = 900
SLACK = 0.5  # CSS pixels of rounding allowed on each edge
RESULT_ID = "dlpackarray-layout-probe"

# Runs at the page's load event, writes its measurements as JSON into a <pre> that
# --dump-dom then prints.  Measuring before the <pre> is added keeps it out of the figures.
PROBE = """
<script>
window.addEventListener("load", function () {
  var html = document.documentElement, body = document.body;
  function box(el) {
    var r = el.getBoundingClientRect();
    return {left: r.left, right: r.right, width: r.width};
  }
  function anchor(el) {
    for (var e = el; e && e !== body; e = e.parentElement) {
      if (e.id) return e.id;
      for (var s = e.previousElementSibling; s; s = s.previousElementSibling)
        if (s.id) return s.id;
    }
    return "";
  }
  var out = {
    viewport: html.clientWidth,
    document: {scrollWidth: html.scrollWidth, clientWidth: html.clientWidth},
    body: {scrollWidth: body.scrollWidth, clientWidth: body.clientWidth},
    tables: []
  };
  document.querySelectorAll("table").forEach(function (t) {
    var r = box(t);
    if (r.width === 0) return;  // not rendered (display: none)
    var clip = null;
    for (var e = t; e && e !== body && e !== html; e = e.parentElement) {
      var ox = getComputedStyle(e).overflowX;
      if (ox !== "visible") { clip = {overflow: ox, box: box(e), tag: e.tagName.toLowerCase(),
                                      cls: e.className || ""}; break; }
    }
    out.tables.push({box: r, scrollWidth: t.scrollWidth, clip: clip, anchor: anchor(t)});
  });
  var pre = document.createElement("pre");
  pre.id = "RESULT_ID";
  pre.textContent = JSON.stringify(out);
  body.appendChild(pre);
});
</script>
""".replace("RESULT_ID", RESULT_ID)


def find_chromium() -> str:
    for name in (os.environ.get("CHROMIUM"), "chromium", "chromium-browser", "google-chrome"):
        if name and shutil.which(name):
            return shutil.which(name) or name
    raise SystemExit(
        "check_docs_layout: no Chromium found (set $CHROMIUM, or apt-get install chromium)"
    )


SANITIZER_ENV = ("LD_PRELOAD", "ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS")


def chromium(browser: str, profile: str, width: int, *args: str) -> subprocess.CompletedProcess:
    cmd = [
        browser,
        "--headless",
        "--disable-gpu",
        "--no-first-run",
        "--disable-extensions",
        f"--user-data-dir={profile}",
        f"--window-size={width},{HEIGHT}",
        # lets the page's own scripts and fonts settle before the dump or the screenshot
        "--virtual-time-budget=3000",
        *args,
    ]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.insert(2, "--no-sandbox")  # Chromium refuses to run as root with its sandbox
    # The sanitizer stage runs the suite with LD_PRELOAD=libasan and ASAN_OPTIONS set for
    # Python; preloaded into Chromium (not our code), that runtime hangs the browser.
    env = {k: v for k, v in os.environ.items() if k not in SANITIZER_ENV}
    return subprocess.run(cmd, capture_output=True, text=True, timeout=180, check=False, env=env)


def measure(browser: str, profile: str, page: Path, width: int) -> dict:
    """Chromium's measurements of ``page`` (a probe copy is written next to it)."""
    text = page.read_text(encoding="utf-8")
    probe = page.with_name(f".layout-probe-{page.name}")
    head, sep, tail = text.rpartition("</body>")
    probe.write_text(head + PROBE + sep + tail if sep else text + PROBE, encoding="utf-8")
    try:
        done = chromium(browser, profile, width, "--dump-dom", probe.as_uri())
    finally:
        probe.unlink()
    m = re.search(rf'<pre id="{RESULT_ID}">(.*?)</pre>', done.stdout, re.S)
    if not m:
        raise RuntimeError(
            f"{page.name}: Chromium returned no measurements (exit {done.returncode}):\n"
            + done.stderr[-2000:]
        )
    raw = m.group(1).replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", '"')
    return json.loads(raw.replace("&amp;", "&"))


def _inside(b: dict, left: float, right: float) -> bool:
    return b["left"] >= left - SLACK and b["right"] <= right + SLACK


def judge(name: str, m: dict) -> tuple[list[str], str]:
    """(failures, one-line summary) for one page's measurements."""
    w = m["viewport"]
    failures = []
    for what in ("document", "body"):
        s = m[what]
        if s["scrollWidth"] > s["clientWidth"]:
            failures.append(
                f"{name}: the {what} scrolls sideways: scrollWidth {s['scrollWidth']} px > "
                f"clientWidth {s['clientWidth']} px"
            )
    widest = 0.0
    for i, t in enumerate(m["tables"]):
        tb, clip = t["box"], t["clip"]
        widest = max(widest, tb["width"])
        where = f"{name}: table {i + 1} (near #{t['anchor'] or '?'}, {tb['width']:.0f} px wide"
        if clip is None:
            if not _inside(tb, 0, w):
                failures.append(
                    f"{where}) spans x={tb['left']:.0f}..{tb['right']:.0f}, outside the "
                    f"{w} px viewport, in no scrolling box"
                )
            continue
        cb = clip["box"]
        if not _inside(cb, 0, w):
            failures.append(
                f"{where}) sits in a <{clip['tag']}> (overflow-x: {clip['overflow']}) spanning "
                f"x={cb['left']:.0f}..{cb['right']:.0f}, outside the {w} px viewport"
            )
        elif clip["overflow"] not in ("auto", "scroll") and not _inside(
            tb, cb["left"], cb["right"]
        ):
            failures.append(
                f"{where}) is cut off by a <{clip['tag']}> with overflow-x: {clip['overflow']} "
                f"({cb['width']:.0f} px wide)"
            )
    boxed = [t for t in m["tables"] if t["clip"]]
    box = max((t["clip"]["box"]["width"] for t in boxed), default=0.0)
    scrolled = sum(
        1 for t in m["tables"] if t["clip"] and t["box"]["width"] > t["clip"]["box"]["width"] + 1
    )
    summary = (
        f"{name}: viewport {w} px; document scrollWidth {m['document']['scrollWidth']} / "
        f"clientWidth {m['document']['clientWidth']}; body {m['body']['scrollWidth']} / "
        f"{m['body']['clientWidth']}; {len(m['tables'])} tables, widest {widest:.0f} px, "
        f"{scrolled} scrolling inside their box (widest box {box:.0f} px): "
        f"{'FAIL' if failures else 'ok'}"
    )
    return failures, summary


# Brings the section ``anchor`` to the top of the window by hiding what precedes it
# inside the page's main content (headless Chromium's --screenshot of a scrolled page comes
# back blank, with a fragment URL or scrollIntoView alike); the sidebars stay.
SHOW_SECTION = """
<script>
window.addEventListener("load", function () {
  var main = "[role=main], main, article, body";
  for (var e = document.getElementById(ANCHOR); e && !e.matches(main); e = e.parentElement)
    for (var s = e.previousElementSibling; s; s = s.previousElementSibling)
      s.style.display = "none";
});
</script>
"""


def screenshot(
    browser: str, profile: str, page: Path, out: Path, width: int, anchor: str = "", query: str = ""
) -> None:
    """The window's top, or the section ``anchor`` at the top of the window; ``query`` is
    the URL's query string (search.html's ``?q=``)."""
    target = page
    if anchor:
        target = page.with_name(f".layout-shot-{page.name}")
        head, sep, tail = page.read_text(encoding="utf-8").rpartition("</body>")
        script = SHOW_SECTION.replace("ANCHOR", json.dumps(anchor))
        target.write_text(head + script + sep + tail, encoding="utf-8")
    try:
        done = chromium(browser, profile, width, f"--screenshot={out}", target.as_uri() + query)
    finally:
        if target != page:
            target.unlink()
    if not out.is_file():
        raise RuntimeError(f"no screenshot {out} (exit {done.returncode}): {done.stderr[-2000:]}")


def check_search(browser: str, profile: str, site: Path, query: str, expect: str) -> str:
    """'' when search.html, asked for ``query``, lists a result whose link starts with
    ``expect`` (the search index is loaded and searched in the browser); else the problem."""
    page = site / "search.html"
    if not page.is_file():
        return "search.html is missing"
    done = chromium(browser, profile, 1280, "--dump-dom", f"{page.as_uri()}?q={quote(query)}")
    hrefs = re.findall(r'<li[^>]*>\s*<a[^>]* href="([^"]+)"', done.stdout)
    print(f"search.html?q={query}: {len(hrefs)} results" + (f", first {hrefs[0]}" if hrefs else ""))
    if not any(h.startswith(expect) for h in hrefs):
        return f"search.html?q={query} lists no result linking {expect} ({len(hrefs)} results)"
    return ""


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("site", type=Path, help="the built HTML site (sphinx-build -b html output)")
    p.add_argument("--pages", nargs="+", default=list(DEFAULT_PAGES), help="pages to check")
    p.add_argument("--width", type=int, default=1280, help="window width in CSS px (1280)")
    p.add_argument("--screenshots", type=Path, help="write PNG screenshots into this folder")
    p.add_argument(
        "--search",
        nargs=2,
        metavar=("QUERY", "LINK"),
        default=("from_dlpack", "api.html#dlpackarray.from_dlpack"),
        help="search.html must list a result linking LINK for QUERY "
        "(default: from_dlpack api.html#dlpackarray.from_dlpack)",
    )
    args = p.parse_args(argv)

    browser = find_chromium()
    missing = [name for name in args.pages if not (args.site / name).is_file()]
    if missing:
        print(f"check_docs_layout: not in {args.site}: {', '.join(missing)}", file=sys.stderr)
        return 2
    if args.screenshots:
        args.screenshots.mkdir(parents=True, exist_ok=True)
    failures = []
    with tempfile.TemporaryDirectory(prefix="docs-layout-") as tmp:
        site = Path(tmp) / "site"
        shutil.copytree(args.site, site)
        profile = str(Path(tmp) / "profile")
        for name in args.pages:
            m = measure(browser, profile, site / name, args.width)
            bad, summary = judge(name, m)
            print(summary)
            failures += bad
            if args.screenshots:
                stem = args.screenshots / Path(name).stem
                screenshot(browser, profile, site / name, stem.with_suffix(".png"), args.width)
                tables = m["tables"]
                if tables:
                    widest = max(tables, key=lambda t: t["box"]["width"])
                    if widest["anchor"]:
                        out = stem.with_name(stem.name + "-widest-table.png")
                        screenshot(browser, profile, site / name, out, args.width, widest["anchor"])
        problem = check_search(browser, profile, site, *args.search)
        if problem:
            failures.append(problem)
        elif args.screenshots:
            out = args.screenshots / "search.png"
            query = f"?q={quote(args.search[0])}"
            screenshot(browser, profile, site / "search.html", out, args.width, query=query)
    for line in failures:
        print(line, file=sys.stderr)
    if failures:
        print(
            f"check_docs_layout: {len(failures)} layout failures at {args.width} px",
            file=sys.stderr,
        )
    if args.screenshots:
        print(f"screenshots in {args.screenshots}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
