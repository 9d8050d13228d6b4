"""What docs/limitations.md says about tvm-ffi and read-only data holds for the installed one.

tvm-ffi takes a ``DLPackArray`` through the DLPack C exchange API, receives a versioned
tensor flagged ``READ_ONLY``, ignores the flag and re-exports the data as writable.  The page
shows this with a runnable example and says that on a read-only mapping the write faults;
both run here in a child interpreter against the installed tvm-ffi, so that a tvm-ffi that
keeps the flag (or refuses the data) fails these tests and the page gets updated.  The
interop matrix must mark such cells with the page's note.
"""

from __future__ import annotations

import pathlib
import re
import signal
import textwrap

from conftest import require, run_python

from dlpackarray.cli import matrix as _matrix
from dlpackarray.cli import matrix_report as _matrix_report

PAGE = pathlib.Path(__file__).resolve().parents[2] / "docs" / "limitations.md"
UPDATE = (
    "the installed tvm-ffi no longer behaves as docs/limitations.md#tvm-ffi-read-only says: "
    "update that section, the matrix note (LIMITATIONS in dlpackarray/cli/matrix_report.py) "
    "and this test"
)


def _section_example() -> str:
    text = PAGE.read_text(encoding="utf-8")
    section = text[text.index("(tvm-ffi-read-only)=") :]
    section = re.split(r"\n\([a-z0-9-]+\)=\n", section[1:])[0]
    blocks = re.findall(r"^```python\n(.*?)^```", section, re.S | re.M)
    assert len(blocks) == 1, "the tvm-ffi section should hold one python example"
    return blocks[0]


def test_documented_example_writes_through_tvm_ffi_into_bytes():
    """The page's example: read-only bytes come back from tvm-ffi writable, and a write lands."""
    require("tvm_ffi", "the documented tvm-ffi behaviour is checked against it")
    check = textwrap.dedent(
        """
        assert x.flags.writeable, "READ_ONLY kept"
        assert data == b"*\\x01\\x02\\x03", data
        """
    )
    proc = run_python(_section_example() + check, timeout=300)
    assert proc.returncode == 0, f"{UPDATE}\n{proc.stdout}{proc.stderr}"
    assert proc.stdout.strip() == "True"


def test_write_through_tvm_ffi_into_a_read_only_mapping_faults():
    """The page says the same write into a read-only memory map ends the interpreter (SIGSEGV)."""
    require("tvm_ffi", "the documented tvm-ffi behaviour is checked against it")
    code = textwrap.dedent(
        """
        import mmap, os, sys, tempfile
        import numpy as np
        import tvm_ffi
        from dlpackarray import DLPackArray

        fd, path = tempfile.mkstemp()
        os.write(fd, bytes(4096))
        os.close(fd)
        fd = os.open(path, os.O_RDONLY)
        os.unlink(path)
        m = mmap.mmap(fd, 4096, prot=mmap.PROT_READ)
        a = DLPackArray(m)
        assert a.readonly
        x = np.from_dlpack(tvm_ffi.from_dlpack(a))
        print("writeable", x.flags.writeable, flush=True)
        x[0] = 1
        print("survived", flush=True)
        """
    )
    proc = run_python(code, timeout=300, env={"PYTHONFAULTHANDLER": ""})
    assert "writeable True" in proc.stdout, f"{UPDATE}\n{proc.stdout}{proc.stderr}"
    assert proc.returncode == -signal.SIGSEGV, f"{UPDATE}\n{proc.stdout}{proc.stderr}"


def test_matrix_marks_read_only_data_taken_by_tvm_ffi():
    """A zero-copy cell of read-only data into tvm-ffi (or torch) points at its section."""
    cell = {"consumer": "tvm-ffi", "case": "float32 read-only", "status": _matrix_report.ZERO_COPY}
    assert _matrix_report._limitation({**cell, "readonly": True}) == "tvm-ffi-read-only"
    assert _matrix_report._limitation({**cell, "readonly": False}) is None
    assert (
        _matrix_report._limitation({**cell, "readonly": True, "status": _matrix_report.COPIED})
        is None
    )
    torch_cell = {**cell, "consumer": "torch", "readonly": True}
    assert _matrix_report._limitation(torch_cell) == "torch-read-only"


def test_every_matrix_note_is_a_section_of_the_page():
    """Each limitation the matrix can cite is a label on docs/limitations.md."""
    text = PAGE.read_text(encoding="utf-8")
    missing = [key for key in _matrix_report.LIMITATIONS if f"({key})=" not in text]
    assert not missing, missing


def test_matrix_cells_of_read_only_data_into_tvm_ffi_carry_the_note():
    """The real matrix run: read-only producers into tvm-ffi are zero-copy and noted."""
    require("tvm_ffi", "the matrix runs its tvm-ffi consumer")
    doc = _matrix.generate(
        producers=["numpy", "memoryview"],
        consumers=["tvm-ffi"],
        cases=["float32 read-only"],
        jobs=1,
    )
    cells = doc["cells"]
    assert len(cells) == 2, cells
    for cell in cells:
        assert cell["status"] == _matrix_report.ZERO_COPY, (UPDATE, cell)
        assert cell["see"] == "tvm-ffi-read-only", cell
