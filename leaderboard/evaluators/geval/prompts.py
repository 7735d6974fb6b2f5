"""G-Eval prompt files: read as the official `gpt4_eval.py` reads them (`open().read()`,
universal newlines), checked for their placeholders, and filled in as it fills them.

A prompt holds `{{Summary}}` and any of `{{Document}}` (the summary's source) and
`{{Reference}}` (one reference summary); which of these it holds decides what the evaluator
reads. Substitution follows nlpyang/geval `gpt4_eval.py:27` exactly: `{{Document}}` is
replaced first, then `{{Summary}}` (so a document that itself contains "{{Summary}}" gets the
summary there too, as there); `{{Reference}}`, sumbench's addition for QAPyramid's
reference-based variant, is replaced last.
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

from tasks.plumbing.errors import DataError

#: G-Eval's SummEval relevance prompt (nlpyang/geval 6f84404, prompts/summeval/rel_detailed.txt)
DEFAULT_PROMPT = Path(__file__).resolve().parent / "prompts" / "rel_detailed.txt"
#: the official file's sha256 (its bytes, CRLF line ends included)
DEFAULT_PROMPT_SHA256 = "2e836f9d9aece1832065b1a166a14d4ec0c050085adcee396af8d365b13daf1d"
PLACEHOLDERS = ("Document", "Summary", "Reference")
_PLACEHOLDER = re.compile(r"\{\{\s*([^{}]*?)\s*\}\}")


@dataclass(frozen=True)
class GEvalPrompt:
    """A prompt file's text (LF line ends), its path, the sha256 of its bytes and the
    placeholders it holds."""
    path: str
    text: str
    sha256: str
    placeholders: frozenset[str]

    @property
    def reads_sources(self) -> bool:
        return "Document" in self.placeholders

    @property
    def reads_references(self) -> bool:
        return "Reference" in self.placeholders

    def render(self, summary: str, document: str | None = None,
               reference: str | None = None) -> str:
        """The prompt with its placeholders filled in (the official order; see the module)."""
        text = self.text
        if self.reads_sources:
            text = text.replace("{{Document}}", document or "")
        text = text.replace("{{Summary}}", summary)
        if self.reads_references:
            text = text.replace("{{Reference}}", reference or "")
        return text


def load_prompt(path: str | Path) -> GEvalPrompt:
    """The prompt file at `path`; a missing or unreadable file, one without `{{Summary}}`, or
    one with another placeholder is a one-line DataError naming the file (and the line)."""
    where = str(path)
    try:
        raw = Path(path).read_bytes()
        with open(path, encoding="utf-8") as handle:  # universal newlines, as the official
            text = handle.read()
    except FileNotFoundError:
        raise DataError("no such G-Eval prompt file", path=where, field="prompt") from None
    except UnicodeDecodeError:
        raise DataError("a G-Eval prompt file must be UTF-8 text", path=where,
                        field="prompt") from None
    except OSError as error:
        raise DataError(f"cannot read the G-Eval prompt file: {error.strerror or error}",
                        path=where, field="prompt") from None
    found = _placeholders(text, where)
    if "Summary" not in found:
        raise DataError("the G-Eval prompt has no {{Summary}} placeholder (it needs one; "
                        "{{Document}} and {{Reference}} are optional)", path=where,
                        field="prompt")
    return GEvalPrompt(where, text, hashlib.sha256(raw).hexdigest(), frozenset(found))


def _placeholders(text: str, where: str) -> set[str]:
    """The placeholders of `text`; an unknown one (or one spelled with spaces, which the
    official plain replacement would leave unfilled) is an error naming its line."""
    found = set()
    for number, line in enumerate(text.split("\n"), start=1):
        for match in _PLACEHOLDER.finditer(line):
            name = match.group(1)
            if match.group(0) != "{{" + name + "}}" or name not in PLACEHOLDERS:
                raise DataError(f"unknown placeholder {match.group(0)!r} in the G-Eval prompt "
                                f"(known: {', '.join('{{' + p + '}}' for p in PLACEHOLDERS)})",
                                path=where, line=number, field="prompt")
            found.add(name)
    return found
