"""The documentation site uses no emoji: its theme (furo) draws text with the system's
fonts, and where no emoji font is installed (headless CI browsers, many Linux machines)
an emoji renders as an empty box.  The interop matrix once marked crashed cells with one.

Scanned: every source the site is built from -- docs/ (pages, and the generated
interop.md, which `python -m dlpackarray matrix --check docs` keeps equal to what the
generator writes), README.md, benchmarks/README.md and the package's sources (docstrings
become the API page).
"""

from __future__ import annotations

import unicodedata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Emoji: every character outside the Basic Multilingual Plane that the site could show
# (the pictographs, U+1F000 and up), the emoji presentation selector, and the BMP
# characters that browsers draw as emoji by default (Emoji_Presentation=Yes).  The
# check marks the matrix uses (U+2713, U+2717) are text-style dingbats, in DejaVu Sans.
BMP_EMOJI = set(
    "⌚⌛⏩⏪⏫⏬⏰⏳◽◾☔☕♈♉♊♋♌♍♎♏♐♑♒♓♿⚓⚡⚪⚫⚽⚾⛄⛅⛎⛔⛪⛲⛳⛵⛺⛽"
    "✅✊✋✨❌❎❓❔❕❗➕➖➗➰➿⬛⬜⭐⭕"
)


def is_emoji(ch: str) -> bool:
    return ord(ch) >= 0x1F000 or ch == "\ufe0f" or ch in BMP_EMOJI


def site_sources() -> list[Path]:
    paths = [ROOT / "README.md", ROOT / "benchmarks" / "README.md"]
    for pattern in ("*.md", "*.rst", "*.py"):
        paths += (ROOT / "docs").rglob(pattern)
    for pattern in ("*.py", "*.pyx", "*.pyi"):
        paths += (ROOT / "src" / "dlpackarray").rglob(pattern)
    return sorted(p for p in paths if "_generated" not in p.parts and "_build" not in p.parts)


def test_sources_found() -> None:
    names = {p.relative_to(ROOT).as_posix() for p in site_sources()}
    assert {"docs/interop.md", "docs/index.rst", "README.md"} <= names


@pytest.mark.parametrize("path", site_sources(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_no_emoji(path: Path) -> None:
    found = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        for ch in sorted({ch for ch in line if is_emoji(ch)}):
            name = unicodedata.name(ch, f"U+{ord(ch):04X}")
            found.append(f"line {number}: {ch!r} ({name})")
    assert not found, f"{path.name} uses emoji the site's fonts may lack: " + "; ".join(found)


def test_detector_catches_the_old_crash_marker() -> None:
    # The control: what docs/interop.md used for a crashed cell is caught, the marks
    # in use now are not.
    assert is_emoji("\N{COLLISION SYMBOL}")
    assert not any(is_emoji(ch) for ch in "✓✗C!CRASH FAIL—–…≤≥")
