"""The one place sumbench loads spaCy: a pipeline by package name or folder
(`spacy_pipeline`, `DEFAULT_PIPELINE` when unnamed, kept once per process), the rule-based
English tokenizer (`blank_english`, no model needed), and one install hint. Pipelines are
kept as loaded models are (tasks.plumbing.kept).

spaCy is optional: the `units`, `stus` and `questeval` extras carry it. Its official models
are not on PyPI; a folder made by `nlp.to_disk` loads the same way as a package."""
from __future__ import annotations

from typing import Any

from tasks.plumbing.errors import SumbenchError
from tasks.plumbing.kept import kept_model

#: the pipeline the source papers' code loads (QuestEval's answers, the SRL predictor's
#: verbs, the SCU-approximation units' sentences and tags)
DEFAULT_PIPELINE = "en_core_web_sm"


class PipelineNotInstalled(SumbenchError):
    """The spaCy pipeline named is neither an installed package nor a pipeline folder."""


def spacy_module(extra: str) -> Any:
    """The `spacy` package, or the install hint naming the extra that carries it."""
    try:
        import spacy
    except ImportError:
        raise SumbenchError(f"this needs spaCy: pip install 'sumbench[{extra}]'") from None
    return spacy


def spacy_pipeline(name: str | None = None, *, extra: str = "units", hint: str = "") -> Any:
    """The spaCy pipeline `name` (a package or a folder; DEFAULT_PIPELINE when None), loaded
    once per process. PipelineNotInstalled names it, with `hint` (what else would do)."""
    name = name or DEFAULT_PIPELINE

    def load() -> Any:
        spacy = spacy_module(extra)
        try:
            return spacy.load(name)
        except (OSError, ImportError, ValueError):
            raise PipelineNotInstalled(
                f"spaCy pipeline {name!r} is not installed: install it or name another "
                f"(--spacy-pipeline){hint}") from None
    return kept_model("spacy", name, load)


def blank_english(extra: str = "units") -> Any:
    """spaCy's rule-based English tokenizer (`spacy.blank("en")`), made once per process."""
    return kept_model("spacy", ("blank", "en"), lambda: spacy_module(extra).blank("en"))
