"""The C API and the exchange table given NULL, and loading a table that does not fit.

``tests/helpers/c_api_probe.c`` is a downstream C extension built against ``dlpackarray.h``
alone. It
calls every function of the C API and of ``DLPackArray.__dlpack_c_exchange_api__`` with NULL
arguments, and calls the header's wrappers before any ``import_dlpackarray()`` while the
``dlpackarray`` module seen by the import is missing or fake (a table of another version, or
too short). Each case runs in its own interpreter: a regression crashes one test, not the run.

Rules checked (docs/c_api.md):

* NULL where an object or an output pointer is needed: the error value, with the exception
  already set kept, else a SystemError naming the function and the argument. Check(NULL) is 0
  and leaves the error indicator alone. A managed tensor handed over is deleted even then.
* ``import_dlpackarray()`` raises ImportError, naming the version the module was built for and
  the one found, for a missing module or table, another major, an older minor (a header of
  minor N needs a table of minor N or newer) and a table shorter than the header's.
* The lazy load in every wrapper propagates that ImportError; Check returns 0 with it set.
"""

from __future__ import annotations

import json
import pathlib
import shutil
import subprocess
import sysconfig
import textwrap

import pytest
from conftest import assert_clean_exit, run_python

import dlpackarray

PROBE_SOURCE = pathlib.Path(__file__).resolve().parents[1] / "helpers" / "c_api_probe.c"
PY_INCLUDE = sysconfig.get_paths()["include"]
SUFFIX = sysconfig.get_config_var("EXT_SUFFIX")
HEADER = pathlib.Path(dlpackarray.get_include()) / "dlpackarray" / "dlpackarray.h"
MAJOR, MINOR = dlpackarray.C_API_VERSION


def _build(root: pathlib.Path, name: str, header_text: str) -> str:
    include = root / name / "dlpackarray"
    include.mkdir(parents=True)
    (include / "dlpackarray.h").write_text(header_text)
    shutil.copy(HEADER.parent / "dlpack_abi.h", include)  # the DLPack ABI it includes
    out = root / f"{name}{SUFFIX}"
    cc = shutil.which("cc")
    assert cc is not None, "no C compiler (cc) to build the probe extension"
    cmd = [cc, "-std=gnu99", "-shared", "-fPIC", "-O1", "-Wall", "-Wextra", "-Werror"]
    cmd += [f"-DPROBE_MODULE={name}", f"-I{PY_INCLUDE}", f"-I{root / name}"]
    cmd += [str(PROBE_SOURCE), "-o", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"probe build failed: {' '.join(cmd)}\n{proc.stderr}"
    return str(out)


NAMES = {"current": "c_api_probe", "newer": "c_api_probe_newer", "1.0": "c_api_probe_1_0"}
# The 1.0 header as released (a checked-in copy): modules built against it must keep working
# with every later 1.x table.
HEADER_1_0 = (
    pathlib.Path(__file__).resolve().parents[1]
    / "helpers"
    / "c_api_1_0"
    / "dlpackarray"
    / "dlpackarray.h"
)


@pytest.fixture(scope="module")
def probes(tmp_path_factory):
    """The probe built against the shipped header, and against a copy of it that announces
    the next minor version (a module built with a newer dlpackarray than the installed one)."""
    root = tmp_path_factory.mktemp("c_api_probe")
    header = HEADER.read_text()
    define = f"#define DLPACKARRAY_C_API_MINOR {MINOR}\n"
    assert header.count(define) == 1
    newer = header.replace(define, f"#define DLPACKARRAY_C_API_MINOR {MINOR + 1}\n")
    return {
        "current": _build(root, NAMES["current"], header),
        "newer": _build(root, NAMES["newer"], newer),
        "1.0": _build(root, NAMES["1.0"], HEADER_1_0.read_text()),
    }


# The child loads a probe, optionally behind a fake ``dlpackarray`` module, runs `body` and
# prints one JSON line: exceptions become [type, message, type of __cause__].
CHILD = """
import ctypes, importlib.util, json, sys, types

def load_probe(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod

def describe(exc):
    if exc is None:
        return None
    cause = exc.__cause__
    return [type(exc).__name__, str(exc), None if cause is None else type(cause).__name__]

def fake_table(major, minor, size, name=b"dlpackarray._C_API"):
    # A table of the header's layout (1.0: 88 bytes on 64-bit, 1.1: 128) plus room to
    # claim more.
    class Table(ctypes.Structure):
        _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32),
                    ("size", ctypes.c_size_t), ("members", ctypes.c_void_p * 16)]
    new = ctypes.pythonapi.PyCapsule_New
    new.restype = ctypes.py_object
    new.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
    table = Table(major, minor, size)
    name = ctypes.create_string_buffer(name)
    keep.extend([table, name])
    return new(ctypes.addressof(table), ctypes.addressof(name), None)

def fake_module(**attrs):
    mod = types.ModuleType("dlpackarray")
    mod.__dict__.update(attrs)
    sys.modules["dlpackarray"] = mod

keep = []
result = {}
"""


def _child(body: str) -> object:
    proc = run_python(CHILD + textwrap.dedent(body) + "\nprint(json.dumps(result))\n")
    assert_clean_exit(proc)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _outcome(code, exc):
    return {"code": code, "exc": exc}


NEW_1_1 = {"empty", "is_contiguous", "as_contiguous", "converter", "from_object_on_stream"}

# -- NULL arguments: the C API -------------------------------------------------------------------

# scenario -> (error value, exception type, words of the message)
C_API_NULL_CASES = {
    "from_object(NULL)": (0, "SystemError", "DLPackArray_FromObject: obj is NULL"),
    "get_dltensor(NULL, out)": (-1, "SystemError", "DLPackArray_GetDLTensor: array is NULL"),
    "get_dltensor(arg, NULL)": (-1, "SystemError", "DLPackArray_GetDLTensor: out is NULL"),
    "to_managed_versioned(NULL)": (
        0,
        "SystemError",
        "DLPackArray_ToManagedVersioned: array is NULL",
    ),
    "to_capsule(NULL)": (0, "SystemError", "DLPackArray_ToCapsule: array is NULL"),
    "from_managed_versioned(NULL)": (0, "ValueError", "NULL DLManagedTensorVersioned"),
    "from_managed_legacy(NULL)": (0, "ValueError", "NULL DLManagedTensor pointer"),
    "from_data(shape=NULL)": (0, "ValueError", "shape is NULL"),
    # 1.1
    "empty(shape=NULL)": (0, "ValueError", "shape is NULL"),
    "is_contiguous(NULL)": (-1, "SystemError", "DLPackArray_IsContiguous: array is NULL"),
    "as_contiguous(NULL)": (0, "SystemError", "DLPackArray_AsContiguous: array is NULL"),
    "converter(arg, NULL)": (0, "SystemError", "DLPackArray_Converter: address is NULL"),
    "from_object_on_stream(NULL)": (
        0,
        "SystemError",
        "DLPackArray_FromObjectOnStream: obj is NULL",
    ),
}


def _run_c_api(probe, scenario, pending):
    return _child(
        f"""
        import dlpackarray
        probe = load_probe({probe!r}, "c_api_probe")
        probe.load()
        arg = dlpackarray.DLPackArray(bytearray(8))
        before = probe.freed()
        code, exc = probe.call({scenario!r}, arg, {pending!r})
        result = {{"code": code, "exc": describe(exc), "freed": probe.freed() - before}}
        """
    )


@pytest.mark.parametrize("scenario", sorted(C_API_NULL_CASES))
def test_c_api_null_argument_is_an_error_not_a_crash(probes, scenario):
    code, kind, words = C_API_NULL_CASES[scenario]
    out = _run_c_api(probes["current"], scenario, False)
    assert out["code"] == code
    assert out["exc"][0] == kind and words in out["exc"][1], out["exc"]
    # A deleter handed over with a failing call runs once (from_data takes one here).
    assert out["freed"] == (1 if scenario.startswith("from_data") else 0)


@pytest.mark.parametrize(
    "scenario",
    [
        "from_object(NULL)",
        "get_dltensor(NULL, out)",
        "to_managed_versioned(NULL)",
        "to_capsule(NULL)",
        "is_contiguous(NULL)",
        "as_contiguous(NULL)",
        "from_object_on_stream(NULL)",
    ],
)
def test_c_api_null_object_keeps_the_exception_that_produced_it(probes, scenario):
    # CPython's convention: a NULL object comes from a failed call, whose error is the one
    # worth reporting.
    out = _run_c_api(probes["current"], scenario, True)
    assert out["code"] == C_API_NULL_CASES[scenario][0]
    assert out["exc"] == ["KeyError", "'pending'", None]


def test_converter_cleanup_call_clears_the_slot_and_never_fails(probes):
    # (a successful conversion, then the cleanup call: 2 when it returned 1 and cleared the
    # slot); a cleanup call with nothing stored is a no-op.
    assert _run_c_api(probes["current"], "converter(arg)", False)["code"] == 2
    out = _run_c_api(probes["current"], "converter(NULL, NULL)", False)
    assert out["code"] == 1 and out["exc"] is None


def test_check_null_is_false_and_leaves_the_error_indicator_alone(probes):
    assert _run_c_api(probes["current"], "check(NULL)", False) == _outcome(0, None) | {"freed": 0}
    pending = _run_c_api(probes["current"], "check(NULL)", True)
    assert pending["code"] == 0 and pending["exc"] == ["KeyError", "'pending'", None]
    assert _run_c_api(probes["current"], "check(arg)", False)["code"] == 1


# -- NULL arguments: the exchange table ----------------------------------------------------------

# scenario -> (return value, Python exception or None, SetError report or None, deleter calls)
EXCHANGE_NULL_CASES = {
    "allocator(out=NULL)": (
        -1,
        None,
        ["SystemError", "managed_tensor_allocator: out is NULL"],
        0,
    ),
    "allocator(prototype=NULL)": (-1, None, ["ValueError", "NULL prototype"], 0),
    "allocator(SetError=NULL)": (
        -1,
        ["SystemError", "managed_tensor_allocator: SetError is NULL"],
        None,
        0,
    ),
    "from_py(NULL, out)": (
        -1,
        ["SystemError", "managed_tensor_from_py_object_no_sync: py_object is NULL"],
        None,
        0,
    ),
    "from_py(arg, NULL)": (
        -1,
        ["SystemError", "managed_tensor_from_py_object_no_sync: out is NULL"],
        None,
        0,
    ),
    "to_py(NULL, out)": (-1, ["ValueError", "NULL DLManagedTensorVersioned pointer"], None, 0),
    # The tensor was handed over (the function steals it): deleted, not leaked.
    "to_py(tensor, NULL)": (
        -1,
        ["SystemError", "managed_tensor_to_py_object_no_sync: out_py_object is NULL"],
        None,
        1,
    ),
    "dltensor_from_py(NULL, out)": (
        -1,
        ["SystemError", "dltensor_from_py_object_no_sync: py_object is NULL"],
        None,
        0,
    ),
    "dltensor_from_py(arg, NULL)": (
        -1,
        ["SystemError", "dltensor_from_py_object_no_sync: out is NULL"],
        None,
        0,
    ),
    "current_work_stream(NULL)": (
        -1,
        ["SystemError", "current_work_stream: out_current_stream is NULL"],
        None,
        0,
    ),
}


@pytest.mark.parametrize("scenario", sorted(EXCHANGE_NULL_CASES))
def test_exchange_table_null_argument_is_an_error_not_a_crash(probes, scenario):
    code, exc, report, freed = EXCHANGE_NULL_CASES[scenario]
    out = _child(
        f"""
        import dlpackarray
        probe = load_probe({probes["current"]!r}, "c_api_probe")
        arg = dlpackarray.DLPackArray(bytearray(8))
        before = probe.freed()
        code, exc = probe.call("ex." + {scenario!r}, arg, False)
        report = probe.set_error()
        result = {{"code": code, "exc": describe(exc)[:2] if exc else None,
                   "report": list(report) if report[0] else None,
                   "freed": probe.freed() - before}}
        """
    )
    assert out == {"code": code, "exc": exc, "report": report, "freed": freed}


# -- import_dlpackarray(): tables that do not fit ------------------------------------------------


def _import_outcome(probes, setup: str, which: str = "current") -> dict:
    return _child(
        f"""
        {setup}
        probe = load_probe({probes[which]!r}, {NAMES[which]!r})
        try:
            probe.load()
            result = {{"exc": None, "loaded": probe.loaded()}}
        except BaseException as e:
            result = {{"exc": describe(e), "loaded": probe.loaded()}}
        """
    )


def test_import_loads_the_installed_table(probes):
    assert _import_outcome(probes, "import dlpackarray") == {"exc": None, "loaded": True}


@pytest.mark.parametrize(
    "setup, cause, words",
    [
        ('sys.modules["dlpackarray"] = None', "ImportError", "cannot be loaded"),
        ("fake_module()", "AttributeError", "cannot be loaded"),
        ("fake_module(_C_API=fake_table(1, 0, 88, name=b'other'))", "AttributeError", "loaded"),
    ],
    ids=["no module", "no table", "not the table's capsule"],
)
def test_import_without_a_table_raises_import_error(probes, setup, cause, words):
    out = _import_outcome(probes, setup)
    assert out["loaded"] is False
    kind, message, cause_kind = out["exc"]
    assert kind == "ImportError" and cause_kind == cause
    assert f"needs the dlpackarray C API {MAJOR}.{MINOR}" in message and words in message
    assert "dlpackarray._C_API" in message


def test_import_refuses_another_major_version(probes):
    out = _import_outcome(probes, f"fake_module(_C_API=fake_table({MAJOR + 1}, 0, 200))")
    assert out["loaded"] is False
    kind, message, _ = out["exc"]
    assert kind == "ImportError"
    assert f"built for the dlpackarray C API {MAJOR}.{MINOR}" in message
    assert f"provides {MAJOR + 1}.0" in message and "rebuild" in message


def test_import_refuses_an_older_minor_even_when_the_size_matches(probes):
    # The module was built with a header of the next minor (whose table happens to be the same
    # size); the installed table, this package's own, is older: refused by its minor.
    out = _import_outcome(probes, "import dlpackarray", which="newer")
    assert out["loaded"] is False
    kind, message, _ = out["exc"]
    assert kind == "ImportError"
    assert f"built for the dlpackarray C API {MAJOR}.{MINOR + 1}" in message
    assert f"older {MAJOR}.{MINOR}" in message and "upgrade dlpackarray" in message


def test_import_refuses_a_table_shorter_than_the_header(probes):
    out = _import_outcome(probes, f"fake_module(_C_API=fake_table({MAJOR}, {MINOR + 3}, 16))")
    assert out["loaded"] is False
    kind, message, _ = out["exc"]
    assert kind == "ImportError" and "only 16 bytes" in message
    assert f"{MAJOR}.{MINOR}" in message and f"{MAJOR}.{MINOR + 3}" in message


def test_import_accepts_a_newer_minor_with_a_longer_table(probes):
    out = _import_outcome(probes, f"fake_module(_C_API=fake_table({MAJOR}, {MINOR + 2}, 144))")
    assert out == {"exc": None, "loaded": True}


# -- the lazy load of every wrapper --------------------------------------------------------------

LAZY_CASES = {
    # scenario -> (error value, deleter calls: a tensor or deleter handed over is never leaked)
    "type": (0, 0),
    "check(arg)": (0, 0),
    "from_object(arg)": (0, 0),
    "from_data(deleter)": (0, 1),
    "from_managed_versioned(tensor)": (0, 1),
    "from_managed_legacy(tensor)": (0, 1),
    "get_dltensor(arg, out)": (-1, 0),
    "to_managed_versioned(arg)": (0, 0),
    "to_capsule(arg)": (0, 0),
    "empty(cpu)": (0, 0),
    "is_contiguous(arg)": (-1, 0),
    "as_contiguous(arg)": (0, 0),
    "converter(arg)": (0, 0),
    "from_object_on_stream(arg)": (0, 0),
}


@pytest.mark.parametrize(
    "setup",
    [
        f"fake_module(_C_API=fake_table({MAJOR + 1}, 0, 200))",
        'sys.modules["dlpackarray"] = None',
        f"fake_module(_C_API=fake_table({MAJOR}, {MINOR}, 16))",
    ],
    ids=["another major", "no module", "short table"],
)
def test_every_wrapper_propagates_the_import_error_of_its_lazy_load(probes, setup):
    out = _child(
        f"""
        {setup}
        probe = load_probe({probes["current"]!r}, "c_api_probe")
        for scenario in {sorted(LAZY_CASES)!r}:
            before = probe.freed()
            # Twice: a failed load is not remembered as a success.
            first = probe.call(scenario, bytearray(8), False)
            second = probe.call(scenario, bytearray(8), False)
            result[scenario] = [first[0], describe(first[1]), second[0], describe(second[1]),
                                probe.freed() - before]
        result["loaded"] = probe.loaded()
        """
    )
    assert out.pop("loaded") is False
    for scenario, (code, freed) in LAZY_CASES.items():
        first_code, first_exc, second_code, second_exc, deleted = out[scenario]
        # Check included: it cannot return an error value, so it answers 0 and leaves the
        # ImportError set.
        assert (first_code, second_code) == (code, code), scenario
        assert first_exc[0] == second_exc[0] == "ImportError", (scenario, first_exc)
        assert "dlpackarray C API" in first_exc[1] and first_exc == second_exc
        assert deleted == 2 * freed, scenario


# -- a module built against the 1.0 header -------------------------------------------------------

# Every 1.0 call of the probe; each must behave exactly as from a module built with the current
# header (the table only grew at its end).
CALLS_1_0 = sorted(
    [*C_API_NULL_CASES.keys() - {k for k in C_API_NULL_CASES if k.split("(")[0] in NEW_1_1}]
    + ["check(arg)", "from_object(arg)", "from_data(deleter)", "get_dltensor(arg, out)"]
    + ["to_managed_versioned(arg)", "to_capsule(arg)", "type"]
)


def test_a_module_built_against_the_1_0_header_keeps_working(probes):
    assert "#define DLPACKARRAY_C_API_MINOR 0" in HEADER_1_0.read_text()
    results = {}
    for which in ("1.0", "current"):
        results[which] = _child(
            f"""
            import dlpackarray
            probe = load_probe({probes[which]!r}, {NAMES[which]!r})
            probe.load()
            result["versions"] = [list(probe.header_version()), list(dlpackarray.C_API_VERSION)]
            arg = dlpackarray.DLPackArray(bytearray(8))
            for scenario in {CALLS_1_0!r}:
                before = probe.freed()
                code, exc = probe.call(scenario, arg, False)
                result[scenario] = [code, describe(exc), probe.freed() - before]
            """
        )
    old, new = results["1.0"], results["current"]
    assert old.pop("versions") == [[1, 0], [MAJOR, MINOR]]
    assert new.pop("versions") == [[MAJOR, MINOR], [MAJOR, MINOR]]
    assert MINOR >= 1
    assert old == new
    assert old["from_object(arg)"][0] == 1 and old["to_capsule(arg)"][0] == 1


def test_the_1_0_header_lacks_the_1_1_functions(probes):
    # The probe built against it has no 1.1 scenarios: the checked-in header really is 1.0.
    out = _child(
        f"""
        probe = load_probe({probes["1.0"]!r}, {NAMES["1.0"]!r})
        try:
            probe.call("empty(cpu)", None, False)
            result["exc"] = None
        except ValueError as e:
            result["exc"] = str(e)
        """
    )
    assert out["exc"] == "unknown scenario empty(cpu)"
