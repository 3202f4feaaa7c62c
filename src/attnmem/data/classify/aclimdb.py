"""The Large Movie Review Dataset (Maas et al. 2011, aclImdb v1): 25,000 training and 25,000 test reviews."""

from __future__ import annotations

import tarfile
from pathlib import Path, PurePosixPath
from typing import cast

from attnmem.core.download import Remote, check_sha256, fetch
from attnmem.core.errors import UserError
from attnmem.data.catalog import DATASETS, fetch_hint
from attnmem.data.classify.document import Document, parsed, split_documents

__all__ = ["AclImdb"]

_REMOTE = DATASETS["aclimdb"].remotes[0]  # the URL, name and sha256 pinned once, in the catalog of the data folder
URL, ARCHIVE, SHA256 = _REMOTE.url, _REMOTE.name, cast(str, _REMOTE.sha256)  # the catalog pins its sha256
LABELS = ("neg", "pos")


def read_reviews(archive: Path, lowercase: bool) -> dict[str, list[Document]]:
    """The labelled reviews of `aclImdb/{train,test}/{neg,pos}/*.txt`, read from the archive (nothing extracted);
    `unsup/` and the bag-of-words files are skipped."""
    splits: dict[str, list[Document]] = {"train": [], "test": []}
    with tarfile.open(archive, "r:gz") as tar:
        for member in tar:
            parts = PurePosixPath(member.name).parts
            if (member.isfile() and len(parts) == 4 and parts[0] == "aclImdb" and parts[1] in splits
                    and parts[2] in LABELS and parts[3].endswith(".txt")):
                file = tar.extractfile(member)
                assert file is not None  # a regular file (isfile above)
                text = file.read().decode("utf-8", errors="replace")
                splits[parts[1]].append(parsed(parts[2], text, f"{archive}:{member.name}", lowercase))
    if not splits["train"]:
        raise UserError(f"{archive}: no aclImdb/train/pos/*.txt or neg/*.txt in the archive: is it {ARCHIVE} ({URL})?")
    return splits


class AclImdb:
    """IMDB reviews labelled `pos` (rated >= 7 of 10) or `neg` (<= 4), from `data_dir/aclImdb_v1.tar.gz`.

    The archive is downloaded from `url` when missing and `download` is set, and must have the sha256 `sha256`.
    The official test reviews are the test split; `val_fraction` of the training reviews (per label, drawn
    with `seed`) are held out for validation. `<br />` in a review ends a sentence.
    """

    def __init__(self, *, data_dir: str, download: bool = False, url: str = URL, sha256: str = SHA256,
                 val_fraction: float = 0.1, seed: int = 0, lowercase: bool = True) -> None:
        self.archive, self.download, self.url, self.sha256 = Path(data_dir) / ARCHIVE, download, url, sha256
        self.val_fraction, self.seed, self.lowercase = val_fraction, seed, lowercase
        self.data_files = [self.archive]

    def prepare(self) -> None:
        """Download the archive when it is missing and `download` is set; else say where to put it."""
        if self.archive.is_file():
            return
        if not self.download:
            hint = fetch_hint(self.archive) or (f": set data.source.download=true to fetch it from {self.url}, "
                                                "or put the file there")
            raise UserError(f"no {ARCHIVE} in {self.archive.parent}{hint}")
        fetch(Remote(url=self.url, name=ARCHIVE, sha256=self.sha256), self.archive.parent, label=f"aclImdb: {ARCHIVE}")

    def load(self) -> dict[str, list[Document]]:
        """The checked archive's reviews: train and val from its training reviews, test from its test reviews."""
        check_sha256(self.archive, self.sha256, str(self.archive))
        reviews = read_reviews(self.archive, self.lowercase)
        train, val = split_documents(reviews["train"], [self.val_fraction], self.seed, "data.source")
        return {"train": train, "val": val, "test": reviews["test"]}
