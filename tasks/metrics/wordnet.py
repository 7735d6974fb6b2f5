"""WordNet 3.0 for NLTK without NLTK's downloader: where the database is, and NLTK's own
`WordNetCorpusReader` over it.

The database comes from Debian's `wordnet-base` package (`apt-get install wordnet-base`,
files in /usr/share/wordnet: `index.*`, `data.*`, `*.exc`, `cntlist.rev`). Debian leaves out
one file NLTK's reader opens, `lexnames` (the 45 lexicographer file names, fixed by WordNet
3.0 and listed in Debian's own lexnames(5WN) manual page): the reader here answers it from
LEXNAMES when the folder has none. A folder of NLTK's own download (`corpora/wordnet`, which
has `lexnames`) serves as well.

The folder is looked up in this order: the `wordnet=DIR` option (its caller passes it), the
environment variable SUMBENCH_WORDNET, Debian's /usr/share/wordnet, then NLTK's data path
(`corpora/wordnet`). A missing database is a one-line error saying how to install one.
"""
from __future__ import annotations

import functools
import io
import os
import warnings
from pathlib import Path

from tasks.plumbing.errors import SumbenchError

ENV_VARIABLE = "SUMBENCH_WORDNET"
DEBIAN_FOLDER = Path("/usr/share/wordnet")
#: the files NLTK's reader opens when it loads, besides `lexnames`
REQUIRED_FILES = tuple(f"{kind}.{pos}" for kind in ("index", "data")
                       for pos in ("adj", "adv", "noun", "verb")) + tuple(
    f"{pos}.exc" for pos in ("adj", "adv", "noun", "verb"))
INSTALL_HINT = ("install WordNet 3.0 with `apt-get install wordnet-base` (Debian/Ubuntu), or "
                f"give its folder as the option wordnet=DIR or in ${ENV_VARIABLE}")

#: WordNet 3.0's lexicographer files, by number (lexnames(5WN))
LEXNAMES = (
    "adj.all", "adj.pert", "adv.all", "noun.Tops", "noun.act", "noun.animal",
    "noun.artifact", "noun.attribute", "noun.body", "noun.cognition", "noun.communication",
    "noun.event", "noun.feeling", "noun.food", "noun.group", "noun.location", "noun.motive",
    "noun.object", "noun.person", "noun.phenomenon", "noun.plant", "noun.possession",
    "noun.process", "noun.quantity", "noun.relation", "noun.shape", "noun.state",
    "noun.substance", "noun.time", "verb.body", "verb.change", "verb.cognition",
    "verb.communication", "verb.competition", "verb.consumption", "verb.contact",
    "verb.creation", "verb.emotion", "verb.motion", "verb.perception", "verb.possession",
    "verb.social", "verb.stative", "verb.weather", "adj.ppl",
)
#: WordNet's syntactic category numbers, by a lexicographer file's prefix
_CATEGORY = {"noun": 1, "verb": 2, "adj": 3, "adv": 4}


def lexnames_text() -> str:
    """The `lexnames` file of WordNet 3.0 ("NN<TAB>name<TAB>category" per line)."""
    return "".join(f"{number:02d}\t{name}\t{_CATEGORY[name.split('.')[0]]}\n"
                   for number, name in enumerate(LEXNAMES))


def missing_files(folder: Path) -> list[str]:
    """The files NLTK's reader needs that `folder` lacks."""
    return [name for name in REQUIRED_FILES if not (folder / name).is_file()]


def _nltk_data_folder() -> Path | None:
    import nltk

    try:
        return Path(str(nltk.data.find("corpora/wordnet")))
    except LookupError:
        return None


def candidate_folders(option: str | None = None) -> list[tuple[str, Path]]:
    """(where it came from, folder) in lookup order; the option or the environment variable,
    when set, is the only candidate."""
    if option:
        return [("option wordnet", Path(option).expanduser())]
    if os.environ.get(ENV_VARIABLE):
        return [(f"${ENV_VARIABLE}", Path(os.environ[ENV_VARIABLE]).expanduser())]
    folders = [("Debian wordnet-base", DEBIAN_FOLDER)]
    nltk_folder = _nltk_data_folder()
    if nltk_folder is not None:
        folders.append(("NLTK data", nltk_folder))
    return folders


def find_wordnet(option: str | None = None) -> Path:
    """The WordNet folder (see the module), or a one-line SumbenchError saying how to get one."""
    candidates = candidate_folders(option)
    for _, folder in candidates:
        if folder.is_dir() and not missing_files(folder):
            return folder
    source, folder = candidates[0]
    lacks = missing_files(folder) if folder.is_dir() else ["the folder"]
    raise SumbenchError(f"no WordNet database at {folder} ({source}; missing "
                        f"{', '.join(lacks[:3])}{' ...' if len(lacks) > 3 else ''}): "
                        f"{INSTALL_HINT}")


def _reader_class():
    from nltk.corpus.reader.wordnet import WordNetCorpusReader

    class FolderWordNetReader(WordNetCorpusReader):
        """NLTK's reader, answering `lexnames` from LEXNAMES where the folder has none, and
        needing no other WordNet."""

        def open(self, file):
            if file == "lexnames" and not (Path(self._root.path) / file).is_file():
                return io.StringIO(lexnames_text())
            return super().open(file)

        def map_wn(self, version="wordnet"):
            """No mapping to NLTK's downloaded WordNet (it serves only the multilingual
            lookups, which this reader has not; NLTK would load that download here)."""
            return None

    return FolderWordNetReader


@functools.lru_cache(maxsize=4)
def load_wordnet(folder: str | os.PathLike):
    """NLTK's `WordNetCorpusReader` over `folder` (English only: no Open Multilingual
    WordNet), read once per folder and process. NLTK (3.10) reads only below the folders of
    `nltk.data.path`, so the folder joins that list."""
    import nltk
    from nltk.data import FileSystemPathPointer

    folder = str(Path(folder).resolve())
    if folder not in nltk.data.path:
        nltk.data.path.append(folder)
    with warnings.catch_warnings():  # "multilingual functions are not available"
        warnings.simplefilter("ignore", UserWarning)
        return _reader_class()(FileSystemPathPointer(folder), None)


def wordnet_version(reader) -> str | None:
    """The version in the database's copyright line ("3.0"), as NLTK reads it."""
    return reader.get_version()
