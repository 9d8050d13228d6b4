"""ctypes view of NumPy's PyArrayInterface, for reading and forging
``__array_struct__`` capsules in tests (layout from NumPy's documentation)."""

import ctypes

# The struct itself is the conformance checker's (one declaration of the layout).
from dlpackarray.testing._abi import PyArrayInterface  # noqa: F401

C_CONTIGUOUS = 0x1
F_CONTIGUOUS = 0x2
ALIGNED = 0x100
NOTSWAPPED = 0x200
WRITEABLE = 0x400
ARR_HAS_DESCR = 0x800


def _api(name, restype, *argtypes):
    # A private prototype: other test helpers may set argtypes/restype on the
    # shared ctypes.pythonapi function objects.
    return ctypes.PYFUNCTYPE(restype, *argtypes)((name, ctypes.pythonapi))


_get_pointer = _api("PyCapsule_GetPointer", ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)
_get_context = _api("PyCapsule_GetContext", ctypes.c_void_p, ctypes.py_object)
_new_capsule = _api(
    "PyCapsule_New", ctypes.py_object, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p
)


def read_struct(capsule):
    """The capsule's PyArrayInterface as a plain dict."""
    s = PyArrayInterface.from_address(_get_pointer(capsule, None))
    return {
        "two": s.two,
        "nd": s.nd,
        "typekind": s.typekind.decode(),
        "itemsize": s.itemsize,
        "flags": s.flags,
        "shape": tuple(s.shape[i] for i in range(s.nd)) if s.shape or s.nd == 0 else None,
        "strides": tuple(s.strides[i] for i in range(s.nd)) if s.strides or s.nd == 0 else None,
        "data": s.data or 0,
        "context": _get_context(capsule) or 0,
    }


class StructExporter:
    """An object whose ``__array_struct__`` is a forged capsule.

    Every field is taken as given (shape/strides None -> NULL pointers), so
    tests can describe lies.  The ctypes memory lives as long as this object.
    """

    def __init__(
        self,
        *,
        two=2,
        nd=1,
        typekind=b"i",
        itemsize=4,
        flags=NOTSWAPPED | WRITEABLE,
        shape=(4,),
        strides=None,
        data=0,
        descr=None,
        has_descr_pointer=None,
        name=None,
    ):
        self._shape = (ctypes.c_ssize_t * max(len(shape), 1))(*shape) if shape is not None else None
        self._strides = (
            (ctypes.c_ssize_t * max(len(strides), 1))(*strides) if strides is not None else None
        )
        self._descr = descr
        self._name = name
        self.struct = PyArrayInterface(
            two,
            nd,
            typekind,
            itemsize,
            flags,
            ctypes.cast(self._shape, ctypes.POINTER(ctypes.c_ssize_t))
            if self._shape is not None
            else None,
            ctypes.cast(self._strides, ctypes.POINTER(ctypes.c_ssize_t))
            if self._strides is not None
            else None,
            data or None,
            id(descr) if (descr is not None or has_descr_pointer) else None,
        )
        # No destructor: the struct belongs to this object, which the
        # capsule's users keep alive through the importer's owner.
        self.__array_struct__ = _new_capsule(ctypes.addressof(self.struct), name, None)
