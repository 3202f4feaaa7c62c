"""The files that ship inside the package: the Hydra configs (`attnmem/conf`) and the sweep files (`attnmem/sweeps`).

They are found through `importlib.resources`, so an installed wheel and a source checkout read the same files
whatever the working directory.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from attnmem.core.errors import UserError

# Hydra's name of the packaged config folder: `@hydra.main(config_path=CONF_PATH)`, `hydra.searchpath`
CONF_PATH = "pkg://attnmem.conf"


def conf_dir() -> Path:
    """The packaged Hydra config folder (`train.yaml`, `eval.yaml` and the groups)."""
    return Path(str(files("attnmem") / "conf"))


def sweeps_dir() -> Path:
    """The packaged folder of sweep files (`memn2n_hops.yaml`, `paper/memn2n_babi1k.yaml`, ...)."""
    return Path(str(files("attnmem") / "sweeps"))


def sweep_names() -> list[str]:
    """The packaged sweeps by name (`memn2n_hops`, `paper/memn2n_babi1k`), protocols and figures left out."""
    root = sweeps_dir()
    names = (p.relative_to(root).with_suffix("").as_posix() for p in root.rglob("*.yaml"))
    return sorted(n for n in names if not n.endswith((".protocol", "figures")))


def sweep_file(name: str | Path) -> Path:
    """A sweep file by path, else by name among the packaged ones (`memn2n_hops`, `sweeps/paper/ntm_copy.yaml`)."""
    path = Path(name)
    if path.is_file():
        return path
    text = path.as_posix().removesuffix(".yaml").removeprefix("sweeps/")
    packaged = sweeps_dir() / f"{text}.yaml"
    if text in sweep_names() and packaged.is_file():
        return packaged
    raise UserError(f"{name}: no such sweep file or packaged sweep; name a file or one of: {', '.join(sweep_names())}")


def sweep_label(path: Path) -> str:
    """How a command names a sweep file: a packaged one by its name (`paper/ntm_copy`), another by its path."""
    try:
        return path.resolve().relative_to(sweeps_dir().resolve()).with_suffix("").as_posix()
    except ValueError:
        return str(path)
