"""dask.sizeof support, loaded by Dask through the ``dask.sizeof`` entry point.

Dask imports this when it imports ``dask.sizeof``; dlpackarray never imports
Dask.  Without it the scheduler would count a DLPackArray as the few dozen bytes
of the Python object, and memory limits and spilling would ignore its data.
"""

from __future__ import annotations


def register(sizeof) -> None:
    """Register :func:`dlpackarray._pickle.byte_extent` as ``sizeof(DLPackArray)``.

    Lazily: the registration runs the first time Dask sizes an object of a
    ``dlpackarray`` type.
    """

    @sizeof.register_lazy("dlpackarray")
    def _register_dlpackarray() -> None:
        from dlpackarray._array import DLPackArray
        from dlpackarray._pickle import byte_extent

        sizeof.register(DLPackArray)(byte_extent)
