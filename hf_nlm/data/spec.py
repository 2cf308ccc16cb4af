"""Which text a run reads: :class:`DataSpec`, a frozen description of a corpus and its splits.

A run names a registered corpus (``corpus="brown"``, read from ``corpus_path`` or its folder in
``$HF_NLM_DATA``), or gives its own split files (``train_file=...``; the corpus is then ``"text"``, or ``"csv"``
when every file ends in ``.csv``). :meth:`DataSpec.load` returns the ``DatasetDict`` through the corpus's loader
in :data:`hf_nlm.data.registry.CORPORA`. Messages name each setting by its command-line flag (``--train-file``),
whose Python name is the field's (``train_file``), as ``transformers.TrainingArguments`` does.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from .registry import CORPORA, OPTION_FLAGS

#: The loader options a spec may set, by field, and the loader keyword each one is passed as.
LOADER_OPTIONS = {"text_column": "text_column", "split_fractions": "split_fractions", "split_seed": "seed"}
SPLITS = ("train", "validation", "test")


def _files(value) -> tuple[str, ...] | None:
    """A split's files as a tuple of absolute paths (a single path may be given as such)."""
    if value is None:
        return None
    paths = [value] if isinstance(value, str | os.PathLike) else list(value)
    return tuple(os.path.abspath(os.fspath(p)) for p in paths)


@dataclass(frozen=True)
class DataSpec:
    """The corpus of a run and its splits.

    Args:
        corpus: a corpus of :data:`hf_nlm.data.registry.CORPORA`; None: ``"text"``, or ``"csv"`` when every split
            file ends in ``.csv``.
        corpus_path: the file or folder a registered corpus is read from (default: its folder in ``$HF_NLM_DATA``).
        train_file, validation_file, test_file: the split files of a ``text`` or ``csv`` corpus (a path or several;
            kept as absolute paths).
        text_column: a CSV corpus's text column (default: ``text``).
        split_fractions: the corpora split by a hash of a record id: the train / validation / test fractions.
        split_seed: the seed of that hash.
    """

    corpus: str | None = None
    corpus_path: str | None = None
    train_file: tuple[str, ...] | None = None
    validation_file: tuple[str, ...] | None = None
    test_file: tuple[str, ...] | None = None
    text_column: str | None = None
    split_fractions: tuple[float, float, float] | None = None
    split_seed: int | None = None

    def __post_init__(self) -> None:
        for split in SPLITS:
            object.__setattr__(self, f"{split}_file", _files(getattr(self, f"{split}_file")))
        if self.corpus_path is not None:
            object.__setattr__(self, "corpus_path", os.path.abspath(os.fspath(self.corpus_path)))
        if self.split_fractions is not None:
            object.__setattr__(self, "split_fractions", tuple(self.split_fractions))
        if self.corpus is not None and self.corpus not in CORPORA:
            raise ValueError(f"--corpus {self.corpus}: unknown corpus; choose from {', '.join(CORPORA)}")
        given = self.split_files()
        if self.corpus is not None and not CORPORA[self.corpus].split_files and given:
            raise ValueError(f"--corpus {self.corpus} reads its own files; drop --train-file/--validation-file/"
                             "--test-file")
        if self.corpus is None and not given:
            named = [name for name, entry in CORPORA.items() if not entry.split_files]
            raise ValueError(f"give --corpus ({', '.join(named)}) or --train-file FILE [--validation-file ...] "
                             "[--test-file ...]")
        name = self.name
        for field, keyword in LOADER_OPTIONS.items():
            if getattr(self, field) is not None and keyword not in CORPORA[name].options:
                takes = [other for other, entry in CORPORA.items() if keyword in entry.options]
                raise ValueError(f"{OPTION_FLAGS[keyword]} applies to --corpus {' / '.join(takes)} only, not {name}")

    def split_files(self) -> dict[str, tuple[str, ...]]:
        """The split files given, by split."""
        return {split: files for split in SPLITS if (files := getattr(self, f"{split}_file"))}

    @property
    def name(self) -> str:
        """The registered corpus this spec reads: ``corpus``, else ``text`` / ``csv`` from the split files."""
        if self.corpus is not None:
            return self.corpus
        given = [path for files in self.split_files().values() for path in files]
        return "csv" if all(path.lower().endswith(".csv") for path in given) else "text"

    def load(self):
        """The corpus as a ``DatasetDict``, from its loader (given ``corpus_path`` or the split files, and the
        loader options set). A split file that is a folder or missing is refused, naming its flag."""
        entry = CORPORA[self.name]
        options = {keyword: getattr(self, field) for field, keyword in LOADER_OPTIONS.items()
                   if getattr(self, field) is not None}
        if not entry.split_files:
            return entry.load(path=self.corpus_path, **options)
        for split, paths in self.split_files().items():
            for path in paths:
                check_split_file(f"--{split}-file", path)
        return entry.load(**{split: getattr(self, f"{split}_file") and list(getattr(self, f"{split}_file"))
                             for split in SPLITS}, **options)

    def describe(self, split: str) -> str:
        """How a message names ``split`` of this corpus: its files, or the corpus."""
        files = getattr(self, f"{split}_file")
        return f"--{split}-file {' '.join(files)}" if files else f"the {split} split of --corpus {self.name}"

    def to_dict(self) -> dict:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(self).items()}


def check_split_file(flag: str, path: str | os.PathLike) -> None:
    """``path``, given to ``flag``, is a file; a folder is refused with the text and CSV files it holds."""
    path = Path(path)
    if path.is_dir():
        found = sorted(p.name for p in path.iterdir() if p.is_file() and p.suffix.lower() in (".txt", ".csv"))
        inside = f"the text files in it: {' '.join(found[:10])}{' ...' if len(found) > 10 else ''}" if found else \
            "it holds no .txt or .csv file"
        raise FileNotFoundError(f"{flag} {path} is a folder, not a file: give files ({inside})")
    if not path.is_file():
        raise FileNotFoundError(f"no such file: {path}")


def split_fingerprints(datasets) -> dict[str, str]:
    """A SHA-256 of each split's texts, in order: what a resumed run compares to know that its data is the run's
    by content, whatever the path."""
    prints = {}
    for split, rows in datasets.items():
        digest = hashlib.sha256()
        for column in sorted(rows.column_names):
            digest.update(column.encode("utf-8") + b"\0")
            for value in rows[column]:
                digest.update(str(value).encode("utf-8", "surrogatepass") + b"\n")
        prints[split] = digest.hexdigest()
    return prints


def data_spec_fields() -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(DataSpec))


__all__ = ["DataSpec", "check_split_file", "data_spec_fields", "split_fingerprints"]
