"""Where Cython constructs a C++ value on every call of a function (issue 23, round 10).

tools/cxx_temporaries.py lists the function-scope C++ temporaries of the
generated code: a ``std::string`` or ``TensorView`` declared there is
constructed and destroyed on every call, even when only a cold branch (an
error message) uses it.  Every one it finds must be listed below with the
reason it belongs there; a new one fails until it is moved into a helper of
its own or listed, and a listed one that is gone fails until it is removed.
"""

from __future__ import annotations

import importlib.util
import pathlib

import pytest

pytest.importorskip("Cython")

ROOT = pathlib.Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location(
    "cxx_temporaries", ROOT / "tools" / "cxx_temporaries.py"
)
cxx_temporaries = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cxx_temporaries)

EVERY_CALL = "the value is the function's work or result, needed on every call"
COLD = "a cold function: errors, first uses, fallbacks"
COPYING = "a route that copies or allocates anyway"

ALLOWED = {
    ("_array", "_import_copy_of", "dla::TensorView"): EVERY_CALL,
    ("_array", "_import_extension_dtype", "std::string"): COLD,
    ("_array", "_device_refused", "std::string"): COLD,
    ("_array_interface", "_supported", "std::string"): COLD,
    ("_array_interface", "_check_struct_descr", "std::string"): EVERY_CALL,
    ("_array_interface", "_typestr_or_raise", "std::string"): EVERY_CALL,
    ("_array_interface", "_export_extension_dtype", "std::string"): COLD,
    ("_arrow", "_concatenate", "std::string"): COPYING,
    ("_arrow", "_from_stream", "dla::TensorView"): COPYING,
    ("_buffer", "_raise_no_format", "std::string"): COLD,
    (
        "_common",
        "__pyx_convert_string_from_py_6libcpp_6string_std__in_string",
        "std::string",
    ): EVERY_CALL,
    ("_common", "_new_dtype_object", "std::string"): COLD,
    ("_common", "_parse_dtype_by_name", "std::string"): EVERY_CALL,
    ("_cuda", "export_cuda_array_interface", "std::string"): EVERY_CALL,
    ("_cuda", "_driver_state", "std::string"): COLD,
    ("_pickle", "reduce_array", "std::string"): COPYING,
}


@pytest.fixture(scope="module")
def found(tmp_path_factory):
    return set(cxx_temporaries.scan_package(tmp_path_factory.mktemp("cython")))


def test_every_temporary_is_listed_with_its_reason(found):
    unlisted = sorted(found - set(ALLOWED))
    assert not unlisted, (
        "C++ temporaries constructed and destroyed on every call of these functions; move "
        f"the expression into a helper or list it in ALLOWED with its reason: {unlisted}"
    )


def test_every_listed_temporary_still_exists(found):
    assert not sorted(set(ALLOWED) - found)


def test_scan_reads_a_hoisted_string_and_skips_plain_values():
    cpp = "\n".join(
        [
            "static int __pyx_f_11dlpackarray_7_buffer_fill_buffer(Py_buffer *__pyx_v_buf) {",
            "  char const *__pyx_v_fmt;",
            "  std::string __pyx_t_10;",
            "  std::vector<dla::ArrowBinding> ::size_type __pyx_t_1;",
            "  dla::DeviceRoute __pyx_t_4;",
            "}",
            "static PyObject *__pyx_f_11dlpackarray_6_arrow__from_stream(PyObject *__pyx_v_obj) {",
            "  dla::TensorView __pyx_t_19;",
            "  std::vector<int64_t>  __pyx_t_2;",
            "}",
        ]
    )
    # A name is shortened where the module is the one named.
    assert cxx_temporaries.scan(cpp, "_buffer")[0] == ("fill_buffer", "std::string")
    assert cxx_temporaries.scan(cpp, "_arrow") == [
        ("__pyx_f_11dlpackarray_7_buffer_fill_buffer", "std::string"),
        ("_from_stream", "dla::TensorView"),
        ("_from_stream", "std::vector<int64_t>"),
    ]
