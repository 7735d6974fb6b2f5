"""SGUs, the SCU-approximation study's LLM-generated units (Nawrath et al., NAACL 2024): its
prompt and the official reading of a reply, as pure functions (SCE
`generation/generate_sgus_chat_parallel.py`, shared/docs/scu-units.md §1).

The messages (lines 59-69): the system instruction, the one-shot pair (a user prompt and
the assistant's completion, as stored under `samples_used` in every released SGU file), then
the preprocessed reference: `<t> ` and ` </t>` removed and ` . ` made `. ` (line 58). The
request sets temperature 0 and nothing else (no `max_tokens`).

The reply (line 76): every ` END\\n` removed, the whole stripped on the left, ` . ` made
`. `, then split on ` # `; units are neither stripped nor filtered. `clean_units` (a named
extension, `--clean`) strips them, splits bullet lists and drops empty ones.
"""
from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tasks.plumbing.errors import DataError

SYSTEM = ("You split the provided input in small sentences separated by an #. The split "
          "sentences represent subsentences of the original sentence.")
SEPARATOR = " # "
_BULLET = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s+")


@dataclass(frozen=True)
class OneShot:
    prompt: str
    completion: str


def read_one_shot(path: str | Path) -> OneShot:
    """The one-shot pair of a released SGU file (`samples_used[0]`), or of a JSON object
    {"prompt", "completion"}."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise DataError(f"cannot read the one-shot pair: {error}", path=str(path)) from None
    if isinstance(data, dict) and isinstance(data.get("samples_used"), list) and \
            data["samples_used"]:
        data = data["samples_used"][0]
    if not isinstance(data, dict) or not all(isinstance(data.get(key), str)
                                             for key in ("prompt", "completion")):
        raise DataError("expected an SGU file with samples_used, or {prompt, completion}",
                        path=str(path), field="samples_used")
    return OneShot(data["prompt"], data["completion"])


def preprocess(reference: str) -> str:
    """The reference as the official code sends it (line 58)."""
    return reference.replace("<t> ", "").replace(" </t>", "").replace(" . ", ". ")


def messages(reference: str, shot: OneShot) -> list[dict]:
    return [{"role": "system", "content": SYSTEM},
            {"role": "user", "content": shot.prompt},
            {"role": "assistant", "content": shot.completion},
            {"role": "user", "content": preprocess(reference)}]


def plain_prompt(chat: Sequence[dict]) -> str:
    """The messages as one text, for a completions endpoint or a model without a chat
    template (a sumbench rendering: the official run used the chat endpoint)."""
    lines = [chat[0]["content"], ""]
    for message in chat[1:]:
        lines.append(f"{'Input' if message['role'] == 'user' else 'Output'}: "
                     f"{message['content'].strip()}")
    return "\n".join(lines) + "\nOutput:"


def official_units(reply: str) -> list[str]:
    """The official post-processing of a reply (line 76)."""
    return reply.replace(" END\n", "").lstrip().replace(" . ", ". ").split(SEPARATOR)


def clean_units(units: Sequence[str]) -> list[str]:
    """An extension: units stripped, bullet lists split into their items, empty ones
    dropped."""
    cleaned = []
    for unit in units:
        for line in unit.split("\n"):
            text = _BULLET.sub("", line).strip().rstrip("#").strip()
            if text:
                cleaned.append(text)
    return cleaned


def reply_status(reply: str, units: Sequence[str]) -> str:
    """"ok", "empty" (no reply text: a refusal or nothing), or "not a split" (one unit: the
    reply did not split the reference, e.g. "There is only one sentence ...")."""
    if not reply.strip():
        return "empty"
    return "ok" if len(units) > 1 else "not a split"
