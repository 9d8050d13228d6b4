"""Hostile ``requested_schema`` capsules on the four Arrow export methods.

A requested schema is a consumer's ArrowSchema, read by the producer before
it exports: it is validated by the same parse as an imported schema, every
node before anything is read through it, so a NULL child, a children count
that disagrees with the type, a NULL or non-UTF-8 format, a released node or
an endless chain is a clear exception, never a crash.  Every case runs in a
subprocess (run_python) with a timeout.  The adversarial corpus
(tests/adversarial/cases_arrow_request.py) drives the same mutations field by
field; the hypothesis test here generates whole hostile chains and checks the
export against the import of the same schema.
"""

from __future__ import annotations

import json
import os
import textwrap

import pytest
from arrow_forge import extension
from conftest import run_python

HELPERS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "helpers")
METHODS = (
    "__arrow_c_array__",
    "__arrow_c_stream__",
    "__arrow_c_device_array__",
    "__arrow_c_device_stream__",
)
SPEC = "https://arrow.apache.org/docs/format/CDataInterface.html#the-arrowschema-structure"

_CHILD = textwrap.dedent(
    """
    import json, sys
    sys.path.insert(0, {here!r})
    import numpy as np
    from arrow_forge import Forge
    from dlpackarray import DLPackArray
    f = Forge()
    d = DLPackArray(np.zeros((3, 4), "f4"))
    out = []
    for levels in {cases!r}:
        cap = f.capsule(f.schema(levels), b"arrow_schema")
        try:
            getattr(d, {method!r})(requested_schema=cap)
            out.append(["ok", ""])
        except Exception as exc:
            out.append([type(exc).__name__, str(exc)])
    print(json.dumps([out, f.releases]))
    """
)

# A fixed-size list node whose declared child is NULL, at the top and one
# level down, under the plain storage and under the tensor extension.
_TENSOR = extension(b"arrow.fixed_shape_tensor", b'{"shape":[4]}')
NULL_CHILD = [
    ([{"format": b"+w:4", "child": "null"}, {"format": b"f"}], "the top-level Arrow field 'x'"),
    (
        [{"format": b"+w:4"}, {"format": b"+w:1", "child": "null"}, {"format": b"f"}],
        "the Arrow child field 'item' at nesting level 1",
    ),
    (
        [{"format": b"+w:4", "child": "null", "metadata": _TENSOR}, {"format": b"f"}],
        "the top-level Arrow field 'x'",
    ),
]


@pytest.mark.parametrize("method", METHODS)
def test_null_child_in_a_requested_list_is_a_value_error_not_a_crash(method):
    """A fixed-size list node of a requested schema whose child pointer is
    NULL is refused naming the node, on every export method, before the
    child is read; the consumer's schema is never released by the producer."""
    cases = [levels for levels, _ in NULL_CHILD]
    proc = run_python(_CHILD.format(here=HELPERS, cases=cases, method=method), timeout=120)
    assert proc.returncode == 0, f"child exited with {proc.returncode}\n{proc.stderr[-3000:]}"
    out, releases = json.loads(proc.stdout.strip().splitlines()[-1])
    for (exc, message), (_, where) in zip(out, NULL_CHILD, strict=True):
        assert exc == "ValueError", message
        assert message == (
            f"requested_schema is not a valid ArrowSchema ({SPEC}): child 0 of {where} is NULL"
        )
    assert releases == {"schema": 0}


_PROPERTY = textwrap.dedent(
    """
    import json, sys
    sys.path.insert(0, {here!r})
    import numpy as np
    from hypothesis import given, settings, HealthCheck
    from hypothesis import strategies as st
    from arrow_forge import Forge, extension, metadata_blob, producer
    from dlpackarray import DLPackArray

    FORMATS = [b"f", b"c", b"i", b"b", b"g", b"u", b"+s", b"+l", b"n", b"", b"+w:1",
               b"+w:3", b"+w:4", b"+w:12", b"+w:", b"+w:-1", b"+w:a", b"+w:2147483648",
               b"\\xff", b"+w:4\\xfe", None]
    META = [None, extension(b"arrow.bool8"),
            extension(b"arrow.fixed_shape_tensor", b'{{"shape":[3,4]}}'),
            extension(b"arrow.fixed_shape_tensor", b'{{"shape":[4,3],"permutation":[1,0]}}'),
            extension(b"arrow.fixed_shape_tensor", b'{{"shape":[2,'),
            extension(b"my.ext"), b"\\xff\\xff\\xff\\xff", metadata_blob([(b"k", b"v")])]
    level = st.fixed_dictionaries({{
        "format": st.sampled_from(FORMATS),
        "name": st.sampled_from([b"x", b"", None, b"\\xff"]),
        "metadata": st.sampled_from(META),
    }}, optional={{
        "n_children": st.sampled_from([-1, 0, 2, 2**62]),
        "children": st.just("null"),
        "child": st.just("null"),
        "dictionary": st.just(True),
        "release": st.just(False),
    }})
    SHAPES = [(3,), (2, 12), (2, 3, 4), (2, 4, 3)]
    seen = {{}}

    @settings(max_examples={examples}, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(st.lists(level, min_size=1, max_size=4), st.sampled_from(SHAPES),
           st.sampled_from([np.float32, np.bool_]), st.sampled_from({methods!r}))
    def check(levels, shape, dtype, method):
        a = np.arange(int(np.prod(shape))).reshape(shape).astype(dtype)
        if shape == (2, 4, 3):
            a = np.ascontiguousarray(a.transpose(0, 2, 1)).transpose(0, 2, 1)
        f = Forge()
        cap = f.capsule(f.schema(levels), b"arrow_schema")
        try:
            getattr(DLPackArray(a), method)(requested_schema=cap)
            got = None
        except (ValueError, OverflowError) as exc:
            got = (type(exc).__name__, str(exc))
        assert f.releases.get("schema", 0) == 0, "the producer released the consumer's schema"
        prefix = "requested_schema is not a valid ArrowSchema ({spec}): "
        if got is None or not got[1].startswith(prefix):
            seen["other"] = seen.get("other", 0) + 1
            if got is not None:
                assert got[1].startswith(("the requested schema is a struct",
                                          "the requested schema nests")), got
            return
        seen["malformed"] = seen.get("malformed", 0) + 1
        # The import of the same schema (parsed before any array is read)
        # refuses it with the same exception and message.
        g = Forge()
        obj = producer("__arrow_c_array__",
                       g.pair(levels, [{{"format": b"f"}}]))
        try:
            DLPackArray(obj)
        except (ValueError, OverflowError) as exc:
            assert (type(exc).__name__, str(exc)) == (got[0], got[1][len(prefix):]), (got, exc)
        else:
            raise AssertionError(f"the import accepted a schema the export refused: {{got}}")

    check()
    print(json.dumps(seen))
    """
)


def test_generated_hostile_requests_are_refused_as_the_import_refuses_them():
    """Whole chains of hostile nodes (any format, NULL pointers, lying
    counts, dictionaries, released nodes, extensions, bad metadata) on the
    four methods: no crash, the consumer's schema is never released, and a
    request refused as malformed is refused by the import of the same schema
    with the same exception and message (one validator)."""
    examples = 150 if os.environ.get("CI") else 60
    code = _PROPERTY.format(here=HELPERS, examples=examples, methods=METHODS, spec=SPEC)
    proc = run_python(code, timeout=600)
    assert proc.returncode == 0, f"child exited with {proc.returncode}\n{proc.stderr[-3000:]}"
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    # The strategy reaches both outcomes.
    assert seen.get("malformed", 0) > 0 and seen.get("other", 0) > 0, seen
