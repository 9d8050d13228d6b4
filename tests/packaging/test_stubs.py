"""The hand-written ``.pyi`` stubs agree with the compiled runtime.

Every public module-level name, class member and property of the runtime modules must be
declared in the stub and vice versa (type aliases, declared as ``X: TypeAlias = ...``, are
typing-only and exempt).  For every function, method and constructor, ``inspect.signature``
must work at runtime (Cython writes each ``def``'s signature as its ``__text_signature__``,
``embedsignature.format=clinic``) and agree with the stub: parameter names, kinds and
defaults.  The stubs are read from the *installed* package, so this also checks that they
ship.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import sys
import types
from dataclasses import dataclass, field
from pathlib import Path

import pytest

import dlpackarray

PKG_DIR = Path(dlpackarray.__file__).parent

#: runtime module -> stub file in the installed package
STUBS = {
    "dlpackarray": "__init__.pyi",
    "dlpackarray._array": "_array.pyi",
    "dlpackarray._common": "_common.pyi",
    "dlpackarray._buffer": "_buffer.pyi",
    "dlpackarray._dlpack": "_dlpack.pyi",
    "dlpackarray._exchange": "_exchange.pyi",
    "dlpackarray._capi": "_capi.pyi",
    "dlpackarray._pickle": "_pickle.pyi",
    "dlpackarray._crafted": "_crafted.pyi",
}

#: Members Cython generates on its own: object creation, pickling support, and the
#: rich-comparison slots that come with ``__eq__`` (they return NotImplemented).
AUTO_MEMBERS = {"__new__", "__doc__", "__lt__", "__le__", "__gt__", "__ge__", "__ne__"}
AUTO_PICKLE_NAMES = ("__reduce_cython__", "__setstate_cython__")

#: Slots Python exposes as methods only from 3.12 (``__buffer__``); the stub declares them for
#: every version (a DLPackArray is a ``typing_extensions.Buffer`` on 3.10/3.11 too).
VERSIONED_MEMBERS = {"__buffer__": (3, 12), "__release_buffer__": (3, 12)}


# -- stub side ---------------------------------------------------------------------------------


@dataclass
class StubFunc:
    node: ast.FunctionDef
    kind: str  # "method", "property", "staticmethod", "classmethod"


#: Stub entry of a ``ClassVar`` attribute (a value stored on the class, not a property).
CLASS_ATTRIBUTE = "class attribute"


@dataclass
class StubClass:
    members: dict[str, StubFunc | str | None] = field(default_factory=dict)  # None: property


def _decorators(node: ast.FunctionDef) -> set[str]:
    return {d.id for d in node.decorator_list if isinstance(d, ast.Name)}


def _kind(node: ast.FunctionDef) -> str:
    decorators = _decorators(node)
    for kind in ("property", "staticmethod", "classmethod"):
        if kind in decorators:
            return kind
    return "method"


def _is_type_alias(node: ast.stmt) -> bool:
    return (
        isinstance(node, ast.AnnAssign)
        and isinstance(node.annotation, ast.Name)
        and node.annotation.id == "TypeAlias"
    )


def _is_protocol(node: ast.stmt) -> bool:
    """A stub-only ``class X(Protocol)``: a structural type for an alias, no runtime class."""
    return isinstance(node, ast.ClassDef) and any(
        isinstance(b, ast.Name) and b.id == "Protocol" for b in node.bases
    )


def _flatten(body: list[ast.stmt]) -> list[ast.stmt]:
    """Statements of a body with ``if sys.version_info >= (3, 12):`` blocks inlined."""
    out = []
    for node in body:
        if isinstance(node, ast.If):
            out += _flatten(node.body) + _flatten(node.orelse)
        else:
            out.append(node)
    return out


def parse_stub(module: str) -> tuple[dict[str, object], list[str] | None]:
    """Module-level names of a stub -> StubClass / StubFunc / None, plus its ``__all__``."""
    tree = ast.parse((PKG_DIR / STUBS[module]).read_text())
    names: dict[str, object] = {}
    all_names = None
    for node in _flatten(tree.body):
        if _is_protocol(node):
            # Typing-only, like the type aliases that use it; private, so no user names it.
            assert node.name.startswith("_"), f"public Protocol {node.name} in {module} stub"
            continue
        if isinstance(node, ast.ClassDef):
            cls = StubClass()
            for item in _flatten(node.body):
                if isinstance(item, ast.FunctionDef):
                    cls.members[item.name] = StubFunc(item, _kind(item))
                elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    # ``x: ClassVar[T]`` is a plain class attribute; any other
                    # annotated attribute is a property of the extension type.
                    is_classvar = (
                        isinstance(item.annotation, ast.Subscript)
                        and isinstance(item.annotation.value, ast.Name)
                        and item.annotation.value.id == "ClassVar"
                    )
                    cls.members[item.target.id] = CLASS_ATTRIBUTE if is_classvar else None
            names[node.name] = cls
        elif isinstance(node, ast.FunctionDef):
            names[node.name] = StubFunc(node, "function")
        elif isinstance(node, ast.ImportFrom):
            # Only explicit re-exports (``import X as X``) are public in a stub.
            for alias in node.names:
                if alias.asname == alias.name:
                    names[alias.name] = None
        elif _is_type_alias(node):
            continue
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names[node.target.id] = None
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name) and target.id == "__all__":
                    all_names = ast.literal_eval(node.value)
                elif isinstance(target, ast.Name):
                    names[target.id] = None
    return names, all_names


# -- runtime side ------------------------------------------------------------------------------


def runtime_names(module: str) -> set[str]:
    mod = importlib.import_module(module)
    if hasattr(mod, "__all__"):
        return set(mod.__all__)
    return {
        n
        for n in dir(mod)
        if not n.startswith("_") and not isinstance(getattr(mod, n), types.ModuleType)
    }


def runtime_members(cls: type) -> set[str]:
    members = set()
    for name, value in vars(cls).items():
        if name in AUTO_MEMBERS:
            continue
        if getattr(value, "__name__", None) in AUTO_PICKLE_NAMES:
            continue
        members.add(name)
    return members


def runtime_signature(obj) -> ast.arguments:
    """``inspect.signature(obj)`` as the arguments of a parsed ``def``."""
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError) as exc:
        raise AssertionError(f"inspect.signature({obj!r}) fails: {exc}") from exc
    return ast.parse(f"def f{sig}: pass").body[0].args


def describe(args: ast.arguments, *, drop_first: bool) -> list[tuple[str, str, str | None]]:
    """(name, kind, default) per parameter; annotations are ignored; ``...`` means 'any'."""
    out = []
    positional = [(a, "posonly") for a in args.posonlyargs] + [(a, "normal") for a in args.args]
    defaults = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    for (arg, kind), default in zip(positional, defaults, strict=True):
        out.append((arg.arg, kind, None if default is None else ast.unparse(default)))
    if args.vararg:
        out.append((args.vararg.arg, "vararg", None))
    for arg, default in zip(args.kwonlyargs, args.kw_defaults, strict=True):
        out.append((arg.arg, "kwonly", None if default is None else ast.unparse(default)))
    if args.kwarg:
        out.append((args.kwarg.arg, "varkw", None))
    return out[1:] if drop_first else out


def assert_same_params(stub: list, runtime: list) -> None:
    assert len(stub) == len(runtime), f"stub {stub} vs runtime {runtime}"
    for s, r in zip(stub, runtime, strict=True):
        assert s[:2] == r[:2], f"parameter {s} in the stub, {r} at runtime"
        assert (s[2] is None) == (r[2] is None), f"default of {s[0]}: stub {s[2]}, runtime {r[2]}"
        if s[2] not in (None, "..."):
            assert s[2] == r[2], f"default of {s[0]}: stub {s[2]}, runtime {r[2]}"


def assert_same_signature(stub: ast.arguments, runtime: ast.arguments, *, drop_first: bool):
    assert_same_params(
        describe(stub, drop_first=drop_first), describe(runtime, drop_first=drop_first)
    )


# -- the checks --------------------------------------------------------------------------------


def _stub_members() -> list[tuple[str, str, str]]:
    out = []
    for module in STUBS:
        names, _ = parse_stub(module)
        for name, entry in names.items():
            out.append((module, name, ""))
            if isinstance(entry, StubClass):
                out += [(module, name, member) for member in entry.members]
    return out


def _param(module: str, name: str, member: str):
    return pytest.param(
        module,
        name,
        member,
        id=".".join(filter(None, (module, name, member))),
    )


@pytest.mark.parametrize("module", sorted(STUBS))
def test_stub_ships_with_the_package(module):
    assert (PKG_DIR / STUBS[module]).is_file()
    assert (PKG_DIR / "py.typed").is_file()


@pytest.mark.parametrize("module", sorted(STUBS))
def test_every_runtime_name_is_in_the_stub(module):
    names, all_names = parse_stub(module)
    missing = runtime_names(module) - set(names)
    assert not missing, f"{module}: public names missing from {STUBS[module]}: {sorted(missing)}"
    mod = importlib.import_module(module)
    if hasattr(mod, "__all__"):
        assert all_names == list(mod.__all__), f"{STUBS[module]} __all__ differs from the runtime"


@pytest.mark.parametrize("module", sorted(STUBS))
def test_every_runtime_class_member_is_in_the_stub(module):
    names, _ = parse_stub(module)
    mod = importlib.import_module(module)
    problems = []
    for name, entry in names.items():
        if not isinstance(entry, StubClass):
            continue
        cls = getattr(mod, name)
        if cls.__module__ != module:
            continue  # re-exported; checked in its own module
        missing = runtime_members(cls) - set(entry.members)
        if missing:
            problems.append(f"{name}: {sorted(missing)}")
    assert not problems, f"{module}: runtime members missing from the stub: {problems}"


@pytest.mark.parametrize(("module", "name", "member"), [_param(*m) for m in _stub_members()])
def test_stub_entry_exists_at_runtime_with_the_same_signature(module, name, member):
    names, _ = parse_stub(module)
    mod = importlib.import_module(module)
    assert hasattr(mod, name), f"{module}.{name} is in the stub but not at runtime"
    entry = names[name] if not member else names[name].members[member]
    if not member:
        if isinstance(entry, StubFunc):
            sig = runtime_signature(getattr(mod, name))
            assert_same_signature(entry.node.args, sig, drop_first=False)
        return

    cls = getattr(mod, name)
    if member in VERSIONED_MEMBERS and sys.version_info < VERSIONED_MEMBERS[member]:
        pytest.skip(f"{member} exists at runtime from Python {VERSIONED_MEMBERS[member]}")
    if member == "__init__":
        # A class is called with its own signature (its __text_signature__), without self.
        stub = describe(entry.node.args, drop_first=True)
        assert_same_params(stub, describe(runtime_signature(cls), drop_first=False))
        return
    assert member in vars(cls), f"{name}.{member} is in the stub but not defined at runtime"
    value = vars(cls)[member]
    is_property = not callable(value) and hasattr(value, "__get__")
    if entry is CLASS_ATTRIBUTE:
        assert not is_property and not callable(value), f"{name}.{member} is not a class attribute"
        return
    if entry is None or entry.kind == "property":
        assert is_property, f"{name}.{member} is a property in the stub, not at runtime"
        return
    assert not is_property, f"{name}.{member} is a method in the stub, a property at runtime"
    if entry.kind in ("staticmethod", "classmethod"):
        assert isinstance(value, (staticmethod, classmethod)) or not hasattr(value, "__objclass__")
    sig = runtime_signature(getattr(cls, member))
    if isinstance(value, types.WrapperDescriptorType):
        # A slot (__len__, __eq__, __float__, ...): Python fixes its parameters, positional
        # only and named by CPython ("value"), so only their number must agree.
        stub_params = describe(entry.node.args, drop_first=False)
        run_params = describe(sig, drop_first=False)
        assert len(stub_params) == len(run_params), f"stub {stub_params} vs runtime {run_params}"
        return
    assert_same_signature(entry.node.args, sig, drop_first=entry.kind != "staticmethod")


@pytest.mark.parametrize(
    "path",
    [
        "DLPackArray",
        "DLPackArray.__dlpack__",
        "DLPackArray.__dlpack_device__",
        "DLPackArray.item",
        "DLPackArray.tolist",
        "DLPackArray.from_buffer",
        "DType",
        "from_dlpack",
    ],
)
def test_inspect_signature_works(path):
    # array-api-tests and IDEs call inspect.signature on these; on a Cython build without
    # signatures it raises ValueError("no signature found for builtin ...").
    obj = dlpackarray
    for part in path.split("."):
        obj = getattr(obj, part)
    assert isinstance(inspect.signature(obj), inspect.Signature)


def test_signature_of_dlpack_bound_and_unbound():
    unbound = inspect.signature(dlpackarray.DLPackArray.__dlpack__)
    assert list(unbound.parameters) == ["self", "stream", "max_version", "dl_device", "copy"]
    bound = inspect.signature(dlpackarray.DLPackArray(b"x").__dlpack__)
    assert list(bound.parameters) == ["stream", "max_version", "dl_device", "copy"]
    for p in bound.parameters.values():
        assert p.kind is inspect.Parameter.KEYWORD_ONLY and p.default is None
    assert str(inspect.signature(dlpackarray.from_dlpack)) == (
        "(x, /, *, device=None, copy=None, stream=None)"
    )
    # The constructor's "/" follows obj (Cython's own embedded class signature counted self).
    assert str(inspect.signature(dlpackarray.DLPackArray)) == (
        "(obj, /, *, copy=None, device=None, stream=None)"
    )
