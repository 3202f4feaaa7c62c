"""The package's layers, read from the import statements of src/attnmem (docs/architecture.md, "Layers").

Rules: no module imports a higher layer; no model, datamodule, family or adapter module imports another of its
kind (a model module: one of models/ that a conf/model yaml names, directly or through its training adapter); data/ and tasks/ do not import each other. Also: no function over 50 lines, no file over 350.
"""

from __future__ import annotations

import ast
import re
import shutil
from pathlib import Path

import yaml
from hydra.utils import get_class

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "attnmem"
CONF = SRC / "conf"  # the packaged configs
# bottom to top; a module may import its own layer and those below
LAYERS = ("core", "attention", "blocks", "models", "nn", "data", "evaluation", "tasks", "callbacks", "replicas", "runtime", "tools")
TOP = len(LAYERS)  # attnmem/__init__.py and __main__.py: the package's front door, above every layer
MAX_FUNCTION_LINES, MAX_FILE_LINES = 50, 350
KINDS = {"models": "model modules", "data": "datamodule modules", "sources": "data source modules",
         "tasks": "family modules", "adapters": "adapter modules"}


def layer_of(module: str) -> int | None:
    """The layer index of a dotted `attnmem...` module name, TOP for the package root, None outside attnmem."""
    parts = module.split(".")
    if parts[0] != "attnmem":
        return None
    if len(parts) == 1 or parts[1] in ("__init__", "__main__"):
        return TOP
    return LAYERS.index(parts[1]) if parts[1] in LAYERS else TOP


def module_name(path: Path, src: Path) -> str:
    """`src/attnmem/models/ntm.py` -> `attnmem.models.ntm` (a package's `__init__` is the package)."""
    parts = list(path.relative_to(src.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path, src: Path) -> list[tuple[int, str]]:
    """(line, imported attnmem module) of every import in a file, nested ones included."""
    found = []
    package = module_name(path, src).split(".") if path.name == "__init__.py" else module_name(path, src).split(".")[:-1]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = ".".join(package[: len(package) - node.level + 1]) if node.level else ""
            module = ".".join(p for p in (base, node.module or "") if p)
            # `from attnmem.runtime import run` imports the module attnmem.runtime.run
            for alias in node.names:
                candidate = f"{module}.{alias.name}"
                is_module = (src.parent / Path(*candidate.split("."))).with_suffix(".py").is_file()
                found.append((node.lineno, candidate if is_module else module))
    return [(line, name) for line, name in found if name == "attnmem" or name.startswith("attnmem.")]


def kinds(src: Path, conf: Path) -> dict[str, set[str]]:
    """The model, datamodule, data source and family modules: where the classes the configs name are defined."""
    targets: dict[str, set[str]] = {"models": set(), "data": set(), "sources": set(), "adapters": set()}
    for group, kind in (("model", "models"), ("data", "data")):
        for file in (conf / group).glob("*.yaml"):
            config = yaml.safe_load(file.read_text()) or {}
            cls = get_class(config["_target_"])
            if kind == "models" and cls.__module__.startswith("attnmem.tasks."):  # a training adapter (tasks/)
                targets["adapters"].add(cls.__module__)
                cls = cls.tensor_model  # the model of models/ it trains
            targets[kind].add(cls.__module__)
            if isinstance(config.get("source"), dict):
                targets["sources"].add(get_class(config["source"]["_target_"]).__module__)
    named = re.compile(r'family_module: ClassVar\[str\] = "([\w.]+)"')
    targets["tasks"] = {
        get_class(m).__module__ for f in (src / "data").rglob("*.py") for m in named.findall(f.read_text())
    }
    return targets


def violations(src: Path = SRC, conf: Path = CONF) -> list[str]:
    """Every import against the layer rules, as `file:line: imports X: rule`."""
    of_kind = kinds(src, conf)
    found = []
    for path in sorted(src.rglob("*.py")):
        me = module_name(path, src)
        mine = layer_of(me)
        where = path.relative_to(src.parent.parent)
        for line, target in imports(path, src):
            theirs = layer_of(target)
            # the package root holds only __version__ and the lazy `attnmem.load_run`: any layer may read the version
            if theirs is None or target in (me, "attnmem"):
                continue
            rule = None
            if theirs > mine:
                rule = f"{LAYERS[mine]}/ may not import the higher layer {LAYERS[theirs]}/ (order: {' < '.join(LAYERS)})"
            elif mine < TOP and {LAYERS[mine], LAYERS[theirs]} == {"data", "tasks"}:
                rule = "data/ and tasks/ do not import each other (a datamodule names its family module as a string)"
            else:
                for kind, modules in of_kind.items():
                    if me in modules and any(target == m or target.startswith(f"{m}.") for m in modules - {me}):
                        rule = f"both are {KINDS[kind]}: what they share belongs in a module that is none (blocks/, core/)"
            if rule and (text := f"{where}:{line}: imports {target}: {rule}") not in found:
                found.append(text)
    return found


def test_no_import_breaks_the_layers() -> None:
    assert violations() == []


def test_the_layer_check_fails_on_an_upward_or_sideways_import(tmp_path: Path) -> None:
    src = tmp_path / "src" / "attnmem"
    shutil.copytree(SRC, src, ignore=shutil.ignore_patterns("__pycache__"))
    ntm = src / "models" / "ntm.py"
    ntm.write_text(ntm.read_text() + "\nfrom attnmem.runtime.run import setup\nfrom attnmem.models import memn2n\n")
    qa = src / "tasks" / "qa.py"
    qa.write_text(qa.read_text() + "\nimport attnmem.data.algorithmic\n")
    nets = src / "tasks" / "sequence_nets.py"
    nets.write_text(nets.read_text() + "\nfrom attnmem.tasks.qa_nets import MemN2NQA\n")
    found = violations(src, CONF)
    lines = len(ntm.read_text().splitlines())
    assert found == [
        f"src/attnmem/models/ntm.py:{lines - 1}: imports attnmem.runtime.run: models/ may not import the higher layer "
        f"runtime/ (order: {' < '.join(LAYERS)})",
        f"src/attnmem/models/ntm.py:{lines}: imports attnmem.models.memn2n: both are model modules: what they share "
        "belongs in a module that is none (blocks/, core/)",
        f"src/attnmem/tasks/qa.py:{len(qa.read_text().splitlines())}: imports attnmem.data.algorithmic: data/ and "
        "tasks/ do not import each other (a datamodule names its family module as a string)",
        f"src/attnmem/tasks/sequence_nets.py:{len(nets.read_text().splitlines())}: imports attnmem.tasks.qa_nets: "
        "both are adapter modules: what they share belongs in a module that is none (blocks/, core/)",
    ]


def long_functions(src: Path = SRC) -> list[str]:
    """Functions longer than MAX_FUNCTION_LINES, from the `def` line to the last line, docstring included."""
    found = []
    for path in sorted(src.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    found.append(f"{path.relative_to(src)}:{node.lineno} {node.name}: {length} lines")
    return found


def test_no_function_over_50_lines() -> None:
    assert long_functions() == []


def test_no_file_over_350_lines() -> None:
    lengths = {str(p.relative_to(SRC)): len(p.read_text().splitlines()) for p in sorted(SRC.rglob("*.py"))}
    assert {p: n for p, n in lengths.items() if n > MAX_FILE_LINES} == {}


def row_names(row: str) -> dict[str | None, set[str]]:
    """The module names a row of the Layers table gives in backticks (`ntm`, `ntm.py`, `ntm.NTM`: ntm), by
    subpackage: those in the parentheses after a `qa/` under "qa", the rest under None."""
    scopes: dict[str | None, set[str]] = {None: set()}
    for match in reversed(list(re.finditer(r"`(\w+)/`\s*\(", row))):  # the innermost groups first
        depth, end = 0, match.end() - 1
        for end in range(match.end() - 1, len(row)):
            depth += {"(": 1, ")": -1}.get(row[end], 0)
            if depth == 0:
                break
        scopes[match[1]] = {m[1] for m in re.finditer(r"`(\w+)[.`]", row[match.end():end])}
        row = row[: match.end()] + row[end:]
    scopes[None] = {m[1] for m in re.finditer(r"`(\w+)[.`/]", row)}
    return scopes


def unnamed_modules(src: Path = SRC, doc: Path = ROOT / "docs" / "architecture.md") -> list[str]:
    """The modules of src/attnmem that docs/architecture.md does not name: one of a layer in backticks on its
    layer's row of the Layers table (one of a subpackage in the parentheses after its `qa/`), or by its path
    (`tasks/hooks.py`, `attnmem.tasks.hooks`) anywhere; a package by its folder (`qa/`, `conf/`)."""
    text = doc.read_text()
    rows = {m[1]: row_names(m[2]) for m in re.finditer(r"^\| `(\w+)/` \|(.*)$", text, re.M)}
    tokens = {t for span in re.findall(r"`([^`]+)`", text) for t in re.findall(r"[\w./]+", span)}
    found = []
    for path in sorted(src.rglob("*.py")):
        parts = path.relative_to(src).with_suffix("").parts
        package = parts[-1] == "__init__"
        names = parts[:-1] if package else parts
        forms = {f"{'/'.join(names)}{'/' if package else '.py'}", ".".join(("attnmem", *names))}
        forms |= {f"attnmem/{form}" for form in forms} | {"/".join(names)} - {""}
        scopes = rows.get(parts[0], {}) if len(parts) > 1 else {}
        if package:
            in_row = len(names) == 1 and names[0] in rows or len(names) == 2 and names[1] in scopes
        else:
            in_row = len(names) in (2, 3) and names[-1] in scopes.get(None if len(names) == 2 else names[1], ())
        if not in_row and not any(t in forms or any(t.startswith(f"{f}.") for f in forms) for t in tokens):
            found.append(str(path.relative_to(src)))
    return found


def test_docs_architecture_names_every_module() -> None:
    assert unnamed_modules() == []


def test_the_module_check_fails_on_a_module_the_document_omits(tmp_path: Path) -> None:
    src = tmp_path / "src" / "attnmem"
    shutil.copytree(SRC, src, ignore=shutil.ignore_patterns("__pycache__"))
    for new in ("runtime/fresh.py", "data/qa/fresh.py", "data/fresh/__init__.py"):
        (src / new).parent.mkdir(exist_ok=True)
        (src / new).write_text('"""New."""\n')
    assert unnamed_modules(src) == ["data/fresh/__init__.py", "data/qa/fresh.py", "runtime/fresh.py"]


def test_the_tests_folders_mirror_the_packages() -> None:
    folders = {p.name for p in (ROOT / "tests").iterdir() if p.is_dir() and p.name not in ("fixtures", "__pycache__")}
    assert folders - set(LAYERS) == set(), "a folder of tests/ is named after the package of src/attnmem it tests"
