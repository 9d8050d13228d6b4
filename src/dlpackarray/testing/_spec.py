"""Where each rule comes from: public specifications, by document, section and URL.

A rule's ``reference`` is one or more ``cite(...)`` strings joined by ``"; "``: the
document's title, the section (``§``) and the address a user can open.
"""

from __future__ import annotations


def cite(document: str, section: str, url: str) -> str:
    """``"document § section (url)"``: one citation of a rule's reference."""
    return f"{document} § {section} ({url})"


_DLPACK_PY = "https://dmlc.github.io/dlpack/latest/python_spec.html"
_DLPACK_C = "https://dmlc.github.io/dlpack/latest/c_api.html"
_API_DLPACK = (
    "https://data-apis.org/array-api/latest/API_specification/generated/"
    "array_api.array.__dlpack__.html"
)
_API_DEVICE = (
    "https://data-apis.org/array-api/latest/API_specification/generated/"
    "array_api.array.__dlpack_device__.html"
)
_API_FROM_DLPACK = (
    "https://data-apis.org/array-api/latest/API_specification/generated/array_api.from_dlpack.html"
)
_ARROW_C = "https://arrow.apache.org/docs/format/CDataInterface.html"
_ARROW_CAPSULE = "https://arrow.apache.org/docs/format/CDataInterface/PyCapsuleInterface.html"
_ARROW_DEVICE = "https://arrow.apache.org/docs/format/CDeviceDataInterface.html"
_ARROW_STREAM = "https://arrow.apache.org/docs/format/CStreamInterface.html"
_ARROW_COLUMNAR = "https://arrow.apache.org/docs/format/Columnar.html"


def dlpack_python(section: str, anchor: str) -> str:
    return cite("DLPack Python specification", section, f"{_DLPACK_PY}#{anchor}")


def dlpack_c(section: str, anchor: str) -> str:
    return cite("DLPack C API", section, f"{_DLPACK_C}#{anchor}")


def array_api_dlpack(section: str) -> str:
    return cite("Array API standard, array.__dlpack__", section, _API_DLPACK)


def array_api_device(section: str) -> str:
    return cite("Array API standard, array.__dlpack_device__", section, _API_DEVICE)


def array_api_from_dlpack(section: str) -> str:
    return cite("Array API standard, from_dlpack", section, _API_FROM_DLPACK)


def arrow_c(section: str, anchor: str) -> str:
    return cite("Arrow C data interface", section, f"{_ARROW_C}#{anchor}")


def arrow_capsule(section: str, anchor: str) -> str:
    return cite("Arrow PyCapsule interface", section, f"{_ARROW_CAPSULE}#{anchor}")


def arrow_device(section: str, anchor: str) -> str:
    return cite("Arrow C device data interface", section, f"{_ARROW_DEVICE}#{anchor}")


def arrow_stream(section: str, anchor: str) -> str:
    return cite("Arrow C stream interface", section, f"{_ARROW_STREAM}#{anchor}")


def arrow_columnar(section: str, anchor: str) -> str:
    return cite("Arrow columnar format", section, f"{_ARROW_COLUMNAR}#{anchor}")


def buffer_protocol(section: str, anchor: str) -> str:
    return cite(
        "Python C API, buffer protocol",
        section,
        f"https://docs.python.org/3/c-api/buffer.html#{anchor}",
    )


def pep3118(section: str, anchor: str) -> str:
    return cite("PEP 3118", section, f"https://peps.python.org/pep-3118/#{anchor}")


def numpy_interface(section: str, anchor: str) -> str:
    return cite(
        "NumPy array interface protocol",
        section,
        f"https://numpy.org/doc/stable/reference/arrays.interface.html#{anchor}",
    )


def cuda_array_interface(section: str, anchor: str) -> str:
    return cite(
        "CUDA Array Interface, version 3",
        section,
        f"https://numba.readthedocs.io/en/stable/cuda/cuda_array_interface.html#{anchor}",
    )
