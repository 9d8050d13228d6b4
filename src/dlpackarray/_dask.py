"""Dask support, loaded by Dask through the ``dask.sizeof`` entry point.

Dask imports this module when it imports ``dask.sizeof`` (which ``import dask``
does); dlpackarray itself never imports Dask or distributed.  It registers:

* ``sizeof(DLPackArray)``: the bytes the elements span.  Without it the
  scheduler would count the few dozen bytes of the Python object, and memory
  limits and spilling would ignore the data.
* distributed's "dask" serializer family for DLPackArray, once (and if)
  ``distributed.protocol.serialize`` is imported: the array travels as a header
  and one frame, its span, without pickle.  The scheduler talks pickle protocol
  4 to everyone (its common denominator), so without this an array gathered
  through the scheduler would be copied into the pickle and out again, where a
  NumPy array, which distributed serializes this way, is not.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import sys

_SERIALIZE = "distributed.protocol.serialize"


def register(sizeof) -> None:
    """The ``dask.sizeof`` entry point: registers both, lazily."""

    @sizeof.register_lazy("dlpackarray")
    def _register_sizeof() -> None:
        from dlpackarray._array import DLPackArray

        sizeof.register(DLPackArray)(sizeof_array)

    module = sys.modules.get(_SERIALIZE)
    if module is not None and hasattr(module, "dask_deserialize"):
        _register_serializers(module)
    elif not any(isinstance(f, _WhenDistributedImports) for f in sys.meta_path):
        sys.meta_path.insert(0, _WhenDistributedImports())


def sizeof_array(x) -> int:
    """``dask.sizeof(x)``: the bytes ``x``'s elements span.  An array that is not
    ready (made by ``__new__`` alone, or whose ``__init__`` failed) holds no data
    and is refused like by every member, not sized as 0 bytes."""
    from dlpackarray._array import require_ready
    from dlpackarray._pickle import byte_extent

    require_ready(x)
    return byte_extent(x)


def dask_serialize(x) -> tuple[dict, list]:
    """distributed's "dask" family: the span as one frame (no copy for host data).
    An array that is not ready is refused, as pickling it is."""
    from dlpackarray._array import DLPackArray, require_ready
    from dlpackarray._pickle import reduce_array

    require_ready(x)
    if type(x) is not DLPackArray:
        # distributed moves on to its pickle family, which keeps a subclass's
        # type and instance state (docs/processes.md, "Subclasses").
        raise NotImplementedError("DLPackArray subclasses travel by pickle")
    _rebuild, args = reduce_array(x, 5)
    version, payload, dtype, shape, strides, offset, readonly, device = args
    frame = payload.raw() if hasattr(payload, "raw") else memoryview(payload)
    header = {
        "version": version,
        "dtype": dtype,
        "shape": shape,
        "strides": strides,
        "offset": offset,
        "readonly": readonly,
        "device": device,
    }
    return header, [frame]


def dask_deserialize(header: dict, frames: list):
    """Inverse of :func:`dask_serialize`; validates like every unpickling."""
    from dlpackarray._pickle import rebuild

    if len(frames) != 1:
        raise ValueError(
            f"cannot unpickle a DLPackArray: it travels as one frame, got {len(frames)}"
        )
    frame = frames[0]
    if not header["readonly"] and memoryview(frame).readonly:
        # A writable array arrives writable (distributed's rule for pickled
        # buffers too): a read-only frame costs a copy.
        frame = bytearray(frame)
    return rebuild(
        header["version"],
        frame,
        header["dtype"],
        tuple(header["shape"]),  # msgpack turned the tuples into lists
        tuple(header["strides"]),
        header["offset"],
        header["readonly"],
        tuple(header["device"]),
    )


def _register_serializers(module) -> None:
    @module.dask_serialize.register_lazy("dlpackarray")
    @module.dask_deserialize.register_lazy("dlpackarray")
    def _register() -> None:
        from dlpackarray._array import DLPackArray

        module.dask_serialize.register(DLPackArray)(dask_serialize)
        module.dask_deserialize.register(DLPackArray)(dask_deserialize)


class _WhenDistributedImports(importlib.abc.MetaPathFinder):
    """Registers the serializers right after ``distributed.protocol.serialize``
    runs, should it ever be imported; it imports nothing itself."""

    def find_spec(self, fullname, path, target=None):
        if fullname != _SERIALIZE:
            return None
        sys.meta_path.remove(self)  # one shot; the lookup below must not find us
        spec = importlib.util.find_spec(fullname)
        loader = getattr(spec, "loader", None)
        if loader is not None and hasattr(loader, "exec_module"):
            run = loader.exec_module

            def exec_module(module) -> None:
                run(module)
                _register_serializers(module)

            loader.exec_module = exec_module  # this module's own loader instance
        return spec
