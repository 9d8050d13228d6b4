"""The consumer's ``__dlpack__`` keyword fallback decides from the producer's
signature, never from the TypeError's text.

A producer whose class name (or message) contains ``max_version`` keeps the
versioned capsule and its read-only flag, and a producer's own TypeError
mentioning "keyword argument" is not retried as if it were about keywords.
Signatures are inspected once per type and cached;
where a signature does not say (``**kwargs``) the retry order is fixed.
"""

from __future__ import annotations

import inspect
import textwrap

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dlpackarray import DLPackArray, from_dlpack


def readonly_source():
    a = np.arange(6, dtype=np.float64)
    a.flags.writeable = False
    return a


class Producer_max_version:  # noqa: N801 -- the name is the point
    """DLPack 1.0 era (no dl_device/copy); Python's TypeError for the
    keywords it lacks names the class, so its text contains "max_version"."""

    def __init__(self, a):
        self.a = a
        self.calls = []

    def __dlpack__(self, *, stream=None, max_version=None):
        self.calls.append({"stream": stream, "max_version": max_version})
        return self.a.__dlpack__(stream=stream, max_version=max_version)

    def __dlpack_device__(self):
        return (1, 0)


CONSUMERS = {
    "from_dlpack_device": lambda p: from_dlpack(p, device="cpu"),
    "DLPackArray_device": lambda p: DLPackArray(p, device="cpu"),
    "DLPackArray_copy_false": lambda p: DLPackArray(p, copy=False),
    "from_dlpack_device_copy_false": lambda p: from_dlpack(p, device="cpu", copy=False),
}


@pytest.mark.parametrize("consumer", sorted(CONSUMERS))
def test_class_name_with_max_version_still_gets_a_versioned_capsule(consumer):
    src = readonly_source()
    p = Producer_max_version(src)
    x = CONSUMERS[consumer](p)
    assert p.calls == [{"stream": None, "max_version": (1, 3)}]
    # Only a versioned capsule carries READ_ONLY.
    assert x.readonly
    assert x.data_ptr == src.__array_interface__["data"][0]


def test_class_name_with_max_version_and_a_copy():
    src = readonly_source()
    p = Producer_max_version(src)
    x = from_dlpack(p, copy=True)
    assert p.calls == [{"stream": None, "max_version": (1, 3)}]
    assert not x.readonly and x.data_ptr != src.__array_interface__["data"][0]
    np.testing.assert_array_equal(np.asarray(x), src)


class FullRefuser:
    """Takes every keyword; refuses with a TypeError of its own whose text
    looks like a keyword refusal."""

    def __init__(self):
        self.calls = 0

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        self.calls += 1
        if max_version is not None:
            raise TypeError("unexpected keyword argument combination for max_version")
        return np.arange(3.0).__dlpack__()

    def __dlpack_device__(self):
        return (1, 0)


@pytest.mark.parametrize("kwargs", [{}, {"copy": True}, {"device": "cpu"}])
def test_own_error_that_reads_like_a_keyword_refusal_is_not_retried(kwargs):
    p = FullRefuser()
    with pytest.raises(TypeError, match="combination") as info:
        from_dlpack(p, **kwargs)
    assert p.calls == 1
    assert info.value.__context__ is None


class Legacy:
    def __init__(self, a):
        self.a = a
        self.calls = []

    def __dlpack__(self, stream=None):
        self.calls.append(stream)
        return self.a.__dlpack__()

    def __dlpack_device__(self):
        return (1, 0)


class PositionalOnly(Legacy):
    """Names max_version, but positionally: it cannot be passed by keyword."""

    def __dlpack__(self, stream=None, max_version=None, /):
        self.calls.append(max_version)
        return self.a.__dlpack__()


class VarPositional(Legacy):
    def __dlpack__(self, *args):
        self.calls.append(args)
        return self.a.__dlpack__()


class KwargsRefusing(Legacy):
    """``**kwargs`` hides what it takes; it refuses every keyword, in words
    that name none of them."""

    def __dlpack__(self, **kwargs):
        self.calls.append(kwargs)
        if kwargs:
            raise TypeError("nope")
        return self.a.__dlpack__()


class KwargsTakingMaxVersionOnly(Legacy):
    def __dlpack__(self, **kwargs):
        self.calls.append(kwargs)
        if set(kwargs) - {"max_version", "stream"}:
            raise TypeError("nope")
        return self.a.__dlpack__(max_version=kwargs.get("max_version"))


@pytest.mark.parametrize(
    "producer, last_call",
    [
        (Legacy, None),
        (PositionalOnly, None),
        (VarPositional, ()),
        (KwargsRefusing, {}),
    ],
)
@pytest.mark.parametrize("kwargs", [{}, {"copy": True}, {"device": "cpu"}])
@pytest.mark.parametrize("consumer", [from_dlpack, DLPackArray])
def test_producers_without_max_version_get_a_legacy_call(consumer, kwargs, producer, last_call):
    src = np.arange(5, dtype=np.int16)
    p = producer(src)
    x = consumer(p, **kwargs)
    assert p.calls[-1] == last_call
    np.testing.assert_array_equal(np.asarray(x), src)
    if producer is not KwargsRefusing:
        # The signature said so: the keyword call failed before the body.
        assert len(p.calls) == 1
    if kwargs.get("copy"):
        assert x.data_ptr != src.__array_interface__["data"][0]


def test_kwargs_producer_taking_max_version_keeps_the_versioned_capsule():
    src = readonly_source()
    p = KwargsTakingMaxVersionOnly(src)
    x = from_dlpack(p, copy=False, device="cpu")
    assert p.calls == [
        {"max_version": (1, 3), "dl_device": (1, 0), "copy": False},
        {"max_version": (1, 3)},
    ]
    assert x.readonly


def test_signature_is_inspected_once_per_type(monkeypatch):
    seen = []
    real = inspect.signature

    def counting(obj, *args, **kwargs):
        seen.append(obj)
        return real(obj, *args, **kwargs)

    monkeypatch.setattr(inspect, "signature", counting)

    class Fresh(Producer_max_version):
        pass

    for _ in range(5):
        assert from_dlpack(Fresh(readonly_source()), device="cpu").readonly
    assert seen == [Producer_max_version.__dict__["__dlpack__"]]

    # A class whose __dlpack__ is replaced is inspected again.
    def legacy(self, stream=None):
        return self.a.__dlpack__()

    Fresh.__dlpack__ = legacy
    x = from_dlpack(Fresh(np.arange(3.0)), device="cpu")
    assert seen[-1] is legacy and len(seen) == 2 and not x.readonly
    from_dlpack(Fresh(np.arange(3.0)), device="cpu")
    assert len(seen) == 2


def test_producer_with_an_uninspectable_signature_uses_the_fixed_order(monkeypatch):
    def broken(obj, *args, **kwargs):
        raise ValueError("no signature found")

    monkeypatch.setattr(inspect, "signature", broken)

    class Opaque(Producer_max_version):
        pass

    src = readonly_source()
    p = Opaque(src)
    x = from_dlpack(p, device="cpu", copy=False)
    # All keywords refused, then max_version only: still versioned.
    assert p.calls == [{"stream": None, "max_version": (1, 3)}] and x.readonly


# -- property: any producer signature, any class name, any message ------------

KEYWORDS = ("stream", "max_version", "dl_device", "copy")
# Names and messages that contain what the old text test looked for.
WORDS = ("max_version", "dl_device", "copy", "keyword argument", "no keyword arguments", "P")
_UNSET = object()
# Each example defines a class and inspects its signature: capped under the CI profile.
BOUNDED = settings(max_examples=min(settings().max_examples, 300))


@st.composite
def producers(draw, refuse_with=None):
    """A producer class with a drawn ``__dlpack__`` signature: each keyword
    absent, positional-only, positional-or-keyword or keyword-only, maybe a
    ``**kwargs`` that takes a drawn subset, and a drawn class name."""
    kinds = {k: draw(st.sampled_from(("absent", "posonly", "pos", "kwonly"))) for k in KEYWORDS}
    if refuse_with is not None:  # takes every keyword by name
        kinds = {k: draw(st.sampled_from(("pos", "kwonly"))) for k in KEYWORDS}
    var_kw = refuse_with is None and draw(st.booleans())
    hidden = draw(st.sets(st.sampled_from(KEYWORDS))) if var_kw else set()
    posonly = [k for k in KEYWORDS if kinds[k] == "posonly"]
    pos = [k for k in KEYWORDS if kinds[k] == "pos"]
    kwonly = [k for k in KEYWORDS if kinds[k] == "kwonly"]
    params = ["self", *(f"{k}=_UNSET" for k in posonly), "/"]
    params += [f"{k}=_UNSET" for k in pos]
    if kwonly:
        params += ["*", *(f"{k}=_UNSET" for k in kwonly)]
    if var_kw:
        params.append("**kw")
    named = pos + kwonly
    name = "_".join(draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=3))).replace(
        " ", "_"
    )
    pairs = "(" + "".join(f"('{k}', {k})," for k in named) + ")"
    source = textwrap.dedent(
        f"""
        class {name}:
            def __init__(self, src):
                self.src = src
                self.calls = []
            def __dlpack__({", ".join(params)}):
                got = {{k: v for k, v in {pairs} if v is not _UNSET}}
                got.update({"kw" if var_kw else "{}"})
                self.calls.append(got)
                if set(got) - set({named!r}) - set({sorted(hidden)!r}):
                    raise TypeError({draw(st.sampled_from(WORDS))!r})
                refusal = {refuse_with!r}
                if refusal is not None:
                    raise TypeError(refusal)
                if got.get("max_version") is None:  # legacy: NumPy lends no read-only data
                    return self.src.copy().__dlpack__()
                return self.src.__dlpack__(max_version=got["max_version"])
            def __dlpack_device__(self):
                return (1, 0)
        """
    )
    namespace = {"_UNSET": _UNSET}
    exec(source, namespace)  # noqa: S102 -- the class under test is generated
    return namespace[name], set(named) | hidden, source


@BOUNDED
@given(producers(), st.sampled_from(("from_dlpack", "DLPackArray")))
def test_every_signature_gets_max_version_exactly_when_it_takes_it(producer, consumer):
    cls, takes, source = producer
    src = readonly_source()
    p = cls(src)
    x = (from_dlpack if consumer == "from_dlpack" else DLPackArray)(p, device="cpu")
    last = p.calls[-1]
    assert set(last) <= takes, source
    assert ("max_version" in last) == ("max_version" in takes), source
    assert x.readonly == ("max_version" in takes), source  # only versioned capsules say so
    np.testing.assert_array_equal(np.asarray(x), src)


@BOUNDED
@given(st.data(), st.sampled_from(WORDS + ("cannot export", "")))
def test_own_type_error_of_a_full_signature_is_never_retried(data, message):
    cls, _, source = data.draw(producers(refuse_with=message))
    p = cls(readonly_source())
    kwargs = data.draw(st.sampled_from(({}, {"copy": True}, {"device": "cpu"})))
    with pytest.raises(TypeError) as info:
        from_dlpack(p, **kwargs)
    assert str(info.value) == message and len(p.calls) == 1, source
    assert info.value.__context__ is None
