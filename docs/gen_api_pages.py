"""The API reference: one page per public name, from `attnmem.__all__` and `attnmem.nn.__all__`.

Run by mkdocs-gen-files at every `mkdocs build`, so a name added to either `__all__` gets its page without
editing anything here. The names are read statically (the modules' source, not an import), so the build needs
neither torch nor the training stack; `tests/test_docs_site.py` checks the result against the imported modules.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src"
MODULES = ("attnmem", "attnmem.nn")  # the public modules, in the order of the reference


def _source(module: str) -> ast.Module:
    path = SRC.joinpath(*module.split("."), "__init__.py")
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def public_names(module: str) -> list[str]:
    """The names of `module.__all__`, read from its source."""
    for node in _source(module).body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, ast.AnnAssign) else []
        if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
            return list(ast.literal_eval(node.value))
    raise ValueError(f"{module} has no __all__")


def definitions(module: str) -> dict[str, str]:
    """Where each public name of `module` is defined: its dotted path, following `from X import name`.

    Imports inside functions count too: the root imports `load_model` in its module `__getattr__`.
    """
    where = {}
    for node in ast.walk(_source(module)):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                where[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return {name: where.get(name, f"{module}.{name}") for name in public_names(module)}


def pages() -> dict[str, tuple[str, str]]:
    """Each public name (`attnmem.nn.NTM`) -> (its page under docs/, the path mkdocstrings renders)."""
    return {f"{module}.{name}": (f"api/{module}.{name}.md", target)
            for module in MODULES for name, target in definitions(module).items()}


def _write() -> None:
    import mkdocs_gen_files

    nav = ["* [Overview](index.md)"]
    for public, (page, target) in pages().items():
        with mkdocs_gen_files.open(page, "w") as f:
            f.write(f"# `{public}`\n\n::: {target}\n    options:\n      show_root_heading: false\n")
        nav.append(f"* [{public}]({page.removeprefix('api/')})")
    with mkdocs_gen_files.open("api/SUMMARY.md", "w") as f:
        f.write("\n".join(nav) + "\n")
    rows = "\n".join(f"| [`{public}`]({page.removeprefix('api/')}) | `{target}` |"
                     for public, (page, target) in pages().items())
    with mkdocs_gen_files.open("api/index.md", "w") as f:
        f.write("# API reference\n\nEvery name of `attnmem.__all__` and `attnmem.nn.__all__`, one page each, "
                "generated from its docstring (the convention: [docstrings](../docstrings.md)).\n\n"
                f"| name | defined in |\n|---|---|\n{rows}\n")


if __name__ in ("__main__", "<run_path>"):
    _write()
