"""Every public name's docstring follows docs/docstrings.md: Google style, with Args:, Shapes: and Returns:.

The public names are those of `attnmem.__all__` and `attnmem.nn.__all__` (the API reference has a page for each).
A function, a method, or a class's constructor (documented in the class docstring) that takes arguments documents
each of them under Args:, and documents no argument its signature lacks; every argument is type-annotated; one
that takes tensors lists each under Shapes:; one that returns something has Returns:. A NamedTuple lists its
fields under Attributes:.
"""

from __future__ import annotations

import importlib
import inspect
import re
import typing
from collections.abc import Callable

import pytest
from torch import nn

import attnmem

PUBLIC_MODULES = ("attnmem", "attnmem.nn")

SECTION = re.compile(r"^(\w[\w ]*):\s*$")
ENTRY = re.compile(r"^    (\*{0,2}\w+)(?: \([^)]*\))?:")
SHAPE = re.compile(r"^    - (\w+(?:, \w+)*):")  # `- keys, values: (B, Tk, D)`: one entry, two names


def public_objects() -> dict[str, object]:
    """Each public name (`attnmem.nn.NTM`) and its object."""
    out = {}
    for module_name in PUBLIC_MODULES:
        module = importlib.import_module(module_name)
        for name in module.__all__:
            out[f"{module_name}.{name}"] = getattr(module, name)
    return out


def sections(doc: str | None) -> dict[str, list[str]]:
    """A docstring's sections by title (its summary and text under ""), each as its lines."""
    out: dict[str, list[str]] = {"": []}
    current = ""
    for line in inspect.cleandoc(doc or "").splitlines():
        match = SECTION.match(line)
        if match:
            current = match.group(1)
            out.setdefault(current, [])
        elif line.strip() and not line.startswith(" "):
            current = ""  # back to text after a section
            out[""].append(line)
        else:
            out[current].append(line)
    return out


def entries(lines: list[str], pattern: re.Pattern[str] = ENTRY) -> list[str]:
    """The names a section documents, one per entry."""
    return [n.strip().lstrip("*") for line in lines if (m := pattern.match(line)) for n in m.group(1).split(",")]


def problems_of_callable(where: str, doc: str | None, signature: inspect.Signature, *, method: bool) -> list[str]:
    """What breaks the convention in the docstring `doc` of a callable with `signature`."""
    if not (doc and doc.strip()):
        return [f"{where}: no docstring"]
    found = sections(doc)
    if not found[""]:
        return [f"{where}: no summary line"]
    params = [p for i, p in enumerate(signature.parameters.values()) if not (method and i == 0)]
    names = [p.name for p in params]
    documented = entries(found.get("Args", []))
    problems = [f"{where}: argument {p.name} has no type annotation" for p in params
                if p.annotation is inspect.Parameter.empty]
    problems += [f"{where}: Args: documents {n}, which the signature lacks" for n in documented if n not in names]
    problems += [f"{where}: Args: does not document {n}" for n in names if n not in documented]
    tensors = [p.name for p in params if "Tensor" in str(p.annotation) and "Callable" not in str(p.annotation)]
    shapes = entries(found.get("Shapes", []), SHAPE)
    problems += [f"{where}: Shapes: does not list {n} (as `- {n}: (B, ...)`)" for n in tensors if n not in shapes]
    returns = signature.return_annotation
    if returns not in (None, "None", inspect.Signature.empty) and not any(s.strip() for s in found.get("Returns", [])):
        problems.append(f"{where}: returns {returns} but has no Returns:")
    if returns is inspect.Signature.empty:
        problems.append(f"{where}: no return annotation")
    return problems


def problems_of_class(where: str, cls: type) -> list[str]:
    """What breaks the convention in a class: its docstring (with its constructor's Args:) and its public methods."""
    if issubclass(cls, tuple) and hasattr(cls, "_fields"):  # a NamedTuple: its fields under Attributes:
        documented = entries(sections(cls.__doc__).get("Attributes", []))
        return [f"{where}: Attributes: does not document the field {f}" for f in cls._fields if f not in documented]
    problems = problems_of_callable(where, cls.__doc__, inspect.signature(cls.__init__), method=True)
    problems = [p for p in problems if "return" not in p]  # __init__ returns None
    for name, member in vars(cls).items():
        if name.startswith("_") and name != "forward":
            continue
        if isinstance(member, property):
            if not (member.__doc__ or "").strip():
                problems.append(f"{where}.{name}: no docstring")
        elif inspect.isfunction(member):
            problems += problems_of_callable(f"{where}.{name}", member.__doc__, inspect.signature(member), method=True)
    if issubclass(cls, nn.Module) and "forward" not in vars(cls) and cls.__mro__[1] is nn.Module:
        problems.append(f"{where}: an nn.Module without forward")
    return problems


def problems_of(where: str, obj: object) -> list[str]:
    """What breaks the convention in one public object."""
    if inspect.isclass(obj):
        return problems_of_class(where, obj)
    if callable(obj):
        return problems_of_callable(where, obj.__doc__, inspect.signature(obj), method=False)
    return []  # a value (__version__): its docstring is the attribute's, in the API reference


@pytest.mark.parametrize("name", list(public_objects()))
def test_the_docstring_follows_the_convention(name: str) -> None:
    problems = problems_of(name, public_objects()[name])
    assert not problems, "docs/docstrings.md:\n" + "\n".join(problems)


def _good(x: int, y: int = 1) -> int:
    """Add.

    Args:
        x: one.
        y: the other.

    Returns:
        their sum.
    """
    return x + y


def _bad(x, y: int) -> int:
    """Add.

    Args:
        x: one.
        z: not an argument.
    """
    return x + y


def _shapes(query: object, keys: object) -> None:
    """Compare.

    Args:
        query: the queries.
        keys: the keys.

    Shapes:
        - query: (B, Tq, D)
    """


@pytest.mark.parametrize(("function", "expected"), [
    (_good, []),
    (_bad, ["x has no type annotation", "documents z, which the signature lacks", "does not document y",
            "has no Returns:"]),
])
def test_the_checker_finds_what_breaks_the_convention(function: Callable[..., typing.Any], expected: list[str]):
    problems = problems_of("f", function)
    assert len(problems) == len(expected) and all(e in p for e, p in zip(expected, problems)), problems


def test_the_checker_asks_shapes_of_every_tensor_argument():
    from torch import Tensor

    _shapes.__annotations__.update(query=Tensor, keys=Tensor)  # as `from __future__ import annotations` gives
    problems = problems_of("f", _shapes)
    assert problems == ["f: Shapes: does not list keys (as `- keys: (B, ...)`)"]


def test_the_public_names_are_those_of_both_all_lists():
    assert set(public_objects()) >= {"attnmem.load_model", "attnmem.nn.attend", "attnmem.nn.NTM"}
    assert attnmem.__all__ and "attnmem.__version__" in public_objects()
