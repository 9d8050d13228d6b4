"""Releases of our exports run by threads the interpreter never saw, racing
its exit, which must neither crash nor hang the exit: the code shared by the DLPack tests
(test_lifetime_crashes.py) and their Arrow twins (test_arrow_shutdown.py).

``PRELUDE`` is the start of a child script: it imports the package and
defines ``take(kind, obj)``, which makes an export of ``DLPackArray(obj)`` of
one of ``KINDS`` and takes it out of its capsule as a C consumer does,
returning the release callback and its argument (a DLPack deleter and its
managed tensor, or an Arrow struct's release and the struct, moved to memory
that is never freed: the thread may use it while the interpreter ends), and
``start(release, arg, lib)``, which runs the callback as the start routine of
a new pthread.

``run_many`` runs a child script many times, a few at once, and returns the
failed runs.  ``RACES`` (environment ``DLPACKARRAY_SHUTDOWN_RACES``, default
24) is how many runs each race test makes; CI sets 200 (``.ci/run``).
"""

from __future__ import annotations

import os
import subprocess
import sys

RACES = int(os.environ.get("DLPACKARRAY_SHUTDOWN_RACES", "24"))

DLPACK_KINDS = ("dlpack_versioned", "dlpack_legacy")
ARROW_KINDS = ("arrow_array", "arrow_device_array", "arrow_stream", "arrow_device_stream")
KINDS = DLPACK_KINDS + ARROW_KINDS

HELPERS_DIR = os.path.dirname(os.path.abspath(__file__))

PRELUDE = f"""
import ctypes, sys
sys.path.insert(0, {HELPERS_DIR!r})
import arrow_ctypes as ac
import dlpack_ctypes as dc
from dlpackarray import DLPackArray

libc = ctypes.CDLL(None)  # releases the GIL around each call
pyapi = ctypes.PyDLL(None)  # keeps it
for lib in (libc, pyapi):
    lib.pthread_create.argtypes = [ctypes.c_void_p] * 4
    lib.pthread_join.argtypes = [ctypes.c_ulong, ctypes.c_void_p]
    lib.pthread_detach.argtypes = [ctypes.c_ulong]
pyapi.malloc.restype = ctypes.c_void_p
pyapi.malloc.argtypes = [ctypes.c_size_t]
pyapi.PyCapsule_GetPointer.restype = ctypes.c_void_p
pyapi.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
pyapi.PyCapsule_GetName.restype = ctypes.c_char_p
pyapi.PyCapsule_GetName.argtypes = [ctypes.py_object]
pyapi.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_char_p]

ARROW = {{
    "arrow_array": (ac.ArrowArray, lambda a: a.__arrow_c_array__()[1]),
    "arrow_device_array": (ac.ArrowDeviceArray, lambda a: a.__arrow_c_device_array__()[1]),
    "arrow_stream": (ac.ArrowArrayStream, lambda a: a.__arrow_c_stream__()),
    "arrow_device_stream": (ac.ArrowDeviceArrayStream, lambda a: a.__arrow_c_device_stream__()),
}}

def take(kind, obj):
    a = DLPackArray(obj)
    if kind.startswith("dlpack"):
        versioned = kind == "dlpack_versioned"
        name = b"dltensor_versioned" if versioned else b"dltensor"
        cap = a.__dlpack__(max_version=(1, 3)) if versioned else a.__dlpack__()
        address = pyapi.PyCapsule_GetPointer(cap, name)
        pyapi.PyCapsule_SetName(cap, b"used_" + name)  # the consumer owns it now
        struct = dc.DLManagedTensorVersioned if versioned else dc.DLManagedTensor
        return ctypes.c_void_p.from_address(address + struct.deleter.offset).value, address
    struct, export = ARROW[kind]
    cap = export(a)
    inside = pyapi.PyCapsule_GetPointer(cap, pyapi.PyCapsule_GetName(cap))
    moved = pyapi.malloc(ctypes.sizeof(struct))  # never freed
    ctypes.memmove(moved, inside, ctypes.sizeof(struct))

    def releasable(address):
        s = struct.from_address(address)
        return s.array if struct is ac.ArrowDeviceArray else s

    releasable(inside).release = None  # moved out: the capsule releases nothing
    return releasable(moved).release, moved

def start(release, arg, lib=pyapi):
    tid = ctypes.c_ulong()
    assert lib.pthread_create(ctypes.byref(tid), None, release, arg) == 0
    return tid.value
"""


def run_many(code: str, runs: int, parallel: int = 4) -> list[str]:
    """Runs ``code`` in ``runs`` fresh interpreters, ``parallel`` at a time.

    Returns one description per failed run: a non-zero status (an abort is
    -6, a segfault -11), a C++ terminate message, or a hang (60 s).
    """
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    failures = []
    for first in range(0, runs, parallel):
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", code],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=env,
            )
            for _ in range(min(parallel, runs - first))
        ]
        for p in procs:
            try:
                _, err = p.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                p.kill()
                _, err = p.communicate()
                failures.append(f"hung\n{err[-2000:]}")
                continue
            if p.returncode != 0 or "terminate called" in err:
                failures.append(f"status {p.returncode}\n{err[-2000:]}")
    return failures


def failure_report(failures: list[str], runs: int) -> str:
    statuses = sorted({f.split("\n", 1)[0] for f in failures})
    return f"{len(failures)}/{runs} runs failed ({', '.join(statuses)}); first:\n{failures[0]}"


# A burst of releases at exit: every export is taken out of its capsule first,
# then one new pthread per export runs its release, all started in one burst
# (PyDLL keeps the GIL across the calls) just before the script ends, so most
# of them are still on their way into Python when the interpreter exits.
BURST = """
work = [take(KINDS[i % len(KINDS)], bytearray(64)) for i in range(50)]
for release, arg in work:
    pyapi.pthread_detach(start(release, arg))
"""


def burst_script(kinds: tuple[str, ...]) -> str:
    return PRELUDE + f"KINDS = {kinds!r}\n" + BURST


# The gate shut: an atexit callback registered before the package is imported
# runs after the package's own (they run last-registered first), while the
# interpreter is still whole.  A release run there by a new thread (joined with
# the GIL released, so it could take it) must not enter Python: it leaks.
AFTER_EXIT_BEGAN = """
import atexit, weakref

def at_exit():
    libc.pthread_join(start(*work, lib=libc), None)
    print("released" if ref() is None else "leaked", flush=True)

atexit.register(at_exit)
{prelude}
class Owner(bytearray):
    pass

owner = Owner(64)
ref = weakref.ref(owner)
work = take({kind!r}, owner)
del owner
print("taken", ref() is not None, flush=True)
"""


def after_exit_began_script(kind: str) -> str:
    return AFTER_EXIT_BEGAN.format(prelude=PRELUDE, kind=kind)


# A release already inside Python when the interpreter exits finishes: the
# owner's finalizer, run by the release on a new thread, signals that it has
# started, then sleeps with the GIL released while the main thread exits.
IN_FLIGHT_AT_EXIT = """
import os, threading, time

entered = threading.Event()

class Owner(bytearray):
    def __del__(self):
        entered.set()
        time.sleep(0.2)
        os.write(1, b"finished\\n")

work = take({kind!r}, Owner(64))
pyapi.pthread_detach(start(*work, lib=libc))
entered.wait()
print("exiting", flush=True)
"""


def in_flight_script(kind: str) -> str:
    return PRELUDE + IN_FLIGHT_AT_EXIT.format(kind=kind)
