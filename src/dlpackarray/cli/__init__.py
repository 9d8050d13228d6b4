"""The ``python -m dlpackarray`` tool, built on the library and kept apart from it.

``import dlpackarray`` never imports this sub-package (tests/cli/test_cli_layout.py checks it in
a fresh interpreter): a user of the library does not load the tool's argument parsing,
reports and worker pool.  :mod:`.main` dispatches the sub-commands to :mod:`.selfcheck`,
:mod:`.inspect`, :mod:`.matrix` (its producers, consumers and cases are in
:mod:`.matrix_cells`, its statuses and reports in :mod:`.matrix_report`) and
:mod:`.conform`; the conformance rules themselves are the library's
:mod:`dlpackarray.testing`.
"""
