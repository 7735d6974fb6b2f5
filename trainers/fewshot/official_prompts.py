"""The USB release's GPT-3.5 prompt pieces, as its few-shot conversion and post-processing
scripts define them (kukrishna/usb, experiments/chatgpt): instructions, record conversion
(cue words without a space after the colon, token-budget truncation of content lines,
windows of SENTk lines for EXT / EVEXT), and output parsers. Written from the scripts'
behaviour; token counts use OpenAI's cl100k_base encoding (offline, from `bpe-openai`).

Conversion of one task record, with `maxlen` tokens for the converted input:
- ABS / COMP: "CONTENT: {lines}\\nSUMMARY:" -> " ".join(output_lines)
- TOPIC: "TOPIC: {topic}\\nCONTENT: {lines}\\nSUMMARY:"
- FIX: "CONTENT: {lines}\\nSUMMARY: {initial}\\nFIXED SUMMARY:" -> fixed summary
- UNSUP: "CONTENT: {lines}\\nSUMMARY: {summary}\\nOUTPUT:" -> annotated summary
- FAC: "CONTENT: {lines}\\nSUMMARY: {claim}\\nLABEL:" -> " Yes" / " No"
  (content lines are kept while the running sum of their token counts stays within maxlen
  minus the fixed text's tokens)
- EXT: windows "CONTENT: SENT0 l0 SENT1 l1 ...\\nLABELS:" -> "SENTi SENTj" of positive lines
  (possibly empty); a line joins a window while tokens + line + 1 + output + 1 < maxlen
- EVEXT: per summary sentence, windows "CLAIM: {claim}\\nCONTENT: SENT0 ...\\nLABELS:"
"""
from __future__ import annotations

import functools
import re
import string
from collections.abc import Sequence
from typing import Any

from tasks.plumbing.errors import SumbenchError
from tasks.plumbing.text import treebank_words

INSTRUCTIONS = {
    "multisentence_compression": "Summarize the following content in a single line.",
    "abstractive_summarization": "Draft a summary for the given document.",
    "fixing_factuality": "The summary might be incorrect. How would you rewrite it to make it "
                         "factually accurate? Make as little changes as possible. Do not add "
                         "any new information to the summary.",
    "unsupported_span_prediction": "Go over the given summary carefully, and regenerate it "
                                   "while surrounding any parts which are not supported by the "
                                   "content using [] and [/] tags.",
    "topicbased_summarization": "Create a short summary of the given content that touches upon "
                                "information which fall under the specified topic.",
    "factuality_classification": "Decide if the following summary is consistent with the "
                                 "corresponding content. Note that consistency means all "
                                 "information in the summary is supported by the content. "
                                 "Answer yes or no.",
    "extractive_summarization": "For the task of extractive summarization, list all the SENTs "
                                "of the content which would be included in its summary.",
    "evidence_extraction": "Below is a claim along with its corresponding content. Identify "
                           "and list all the sentences within the content that partially or "
                           "entirely support the claim.",
}
#: tokens reserved for the answer (the release's longest training outputs); none for EXT/EVEXT
MAX_OUTPUT_TOKENS = {"abstractive_summarization": 557, "fixing_factuality": 211,
                     "topicbased_summarization": 368, "multisentence_compression": 211,
                     "unsupported_span_prediction": 215, "factuality_classification": 1}


@functools.lru_cache(maxsize=1)
def cl100k():
    """OpenAI's cl100k_base encoding, offline (bpe-openai embeds the ranks)."""
    try:
        import bpe_openai
    except ImportError:
        raise SumbenchError("the official GPT-3.5 mode counts tokens with cl100k_base: "
                            "install bpe-openai (pip install bpe-openai); tiktoken would "
                            "download the ranks, which needs the network") from None
    return bpe_openai.get_encoding("cl100k_base")


def count(text: str) -> int:
    return len(cl100k().encode(text))


def keep_lines(lines: Sequence[str], maxlen: int) -> list[str]:
    """The first lines while the running sum of their token counts stays <= maxlen (the sum
    counts every line, as in the release, so nothing after the first line that does not fit
    is kept)."""
    kept, total = [], 0
    for line in lines:
        total += count(line)
        if total <= maxlen:
            kept.append(line)
    return kept


def _content(record: dict, template: str, maxlen: int, **fields: str) -> str:
    fixed = count(template.format(content="", **fields))
    return template.format(content=" ".join(keep_lines(record["input_lines"], maxlen - fixed)),
                           **fields)


def convert_text_task(task: str, record: dict, maxlen: int) -> list[dict]:
    if task in ("abstractive_summarization", "multisentence_compression"):
        source = _content(record, "CONTENT: {content}\nSUMMARY:", maxlen)
        target = " ".join(record["output_lines"])
    elif task == "topicbased_summarization":
        source = _content(record, "TOPIC: {topic}\nCONTENT: {content}\nSUMMARY:", maxlen,
                          topic=record["topic_name"])
        target = " ".join(record["output_lines"])
    elif task == "fixing_factuality":
        source = _content(record, "CONTENT: {content}\nSUMMARY: {summary}\nFIXED SUMMARY:",
                          maxlen, summary=record["initial_summary"])
        target = record["fixed_summary"]
    elif task == "unsupported_span_prediction":
        source = _content(record, "CONTENT: {content}\nSUMMARY: {summary}\nOUTPUT:", maxlen,
                          summary=record["summary"])
        target = record["annotated_summary"]
    else:  # factuality_classification
        source = _content(record, "CONTENT: {content}\nSUMMARY: {summary}\nLABEL:", maxlen,
                          summary=record["summary_sent"])
        target = " Yes" if record["label"] == 0 else " No"
    return [{"input_string": source, "output_string": target, "window": 0}]


def line_windows(lines: Sequence[str], positive: set[int], prefix: str, maxlen: int,
                 cap: int | None = None) -> list[dict]:
    """EXT / EVEXT windows of SENTk-numbered lines (prefix "" for EXT)."""
    windows, start = [], 0
    while start < len(lines):
        text, out, used, kept = prefix, [], count(prefix), []
        while start + len(kept) < len(lines):
            k, line = len(kept), lines[start + len(kept)]
            ids = count(f"SENT{k} {line}")
            if cap is not None:
                ids = min(ids, cap)
            out_ids = count(f"SENT{k}") if start + k in positive else 0
            if used + ids + 1 + out_ids + 1 >= maxlen:
                break
            text = f"{text} SENT{k} {line}"
            if start + k in positive:
                out.append(f"SENT{k}")
            used += ids + 1 + out_ids + 1
            kept.append(line)
        if not kept:  # the release would loop forever here; one line per window instead
            kept, text = [lines[start]], f"{prefix} SENT0 {lines[start]}"
            out = ["SENT0"] if start in positive else []
        windows.append({"input_string": f"{text.strip()}\nLABELS:",
                        "output_string": " ".join(out), "lines": (start, start + len(kept)),
                        "window": len(windows)})
        start += len(kept)
    return windows


def convert(task: str, record: dict, maxlen: int) -> list[dict]:
    """The converted prompts of one task-dataset record (several windows for EXT / EVEXT;
    EVEXT entries carry the `summ_idx` of their claim)."""
    if task == "extractive_summarization":
        positive = {j for j, label in enumerate(record["labels"]) if label}
        windows = line_windows(record["input_lines"], positive, "", maxlen)
        return [{**w, "input_string": "CONTENT: " + w["input_string"]} for w in windows]
    if task == "evidence_extraction":
        converted = []
        for summ_idx, (claim, evidence) in enumerate(zip(record["summary_lines"],
                                                         record["evidence_labels"])):
            prefix = f"CLAIM: {claim}\nCONTENT: "
            cap = maxlen - count(prefix) - 1
            for window in line_windows(record["input_lines"], set(evidence), prefix, maxlen,
                                       cap):
                converted.append({**window, "summ_idx": summ_idx})
        return converted
    if task not in INSTRUCTIONS:
        raise SumbenchError(f"no official GPT-3.5 prompt for task {task!r}")
    return convert_text_task(task, record, maxlen)


# ---- parsers (the release's post-processing) ---------------------------------------------
FAC_DEFAULT = [1.0]   # the release's default answer: "most summaries are factual"


def parse_fac(text: str) -> tuple[list[float], bool]:
    """[p(supported)] by the release's phrase rules, checked in its order (yes before no);
    (prediction, parsed) where parsed is False when the default answer was used."""
    words = [word.lower().strip(string.punctuation) for word in treebank_words(text.lower())]
    joined = " ".join(words).strip()
    rules = ((lambda: "summary is not consistent" in joined, 0.0),
             (lambda: "summary is partially consistent" in joined, 0.0),
             (lambda: "summary is mostly consistent" in joined, 0.0),
             (lambda: "some" in words and "claims" in words and "supported" in words, 0.0),
             (lambda: "summary is consistent" in joined, 1.0),
             (lambda: "partial" in joined or "mostly" in joined, 0.0),
             (lambda: "insufficient evidence" in joined, 0.0),
             (lambda: "are supported" in joined, 1.0),
             (lambda: "factually accurate" in joined, 1.0),
             (lambda: joined == "not supported", 0.0),
             (lambda: joined == "supported", 1.0),
             (lambda: "yes" in words or "true" in words, 1.0),
             (lambda: "no" in words or "false" in words, 0.0))
    for test, value in rules:
        if test():
            return [value], True
    return list(FAC_DEFAULT), False


def parse_sent_ids(input_string: str, text: str) -> tuple[list[float], bool]:
    """1.0 for every SENTk of the prompt's last CONTENT that the answer names as an exact
    space-separated token, else 0.0; parsed is False when no token named a sentence."""
    sentences = re.findall(r"SENT\d+", input_string.split("CONTENT:")[-1].strip())
    named = {token.strip() for token in text.strip().split(" ")}
    values = [1.0 if sent in named else 0.0 for sent in sentences]
    return values, bool(named & set(sentences)) or not text.strip()


def parse_official(task: str, input_string: str, text: str) -> tuple[Any, bool]:
    if task == "factuality_classification":
        return parse_fac(text)
    if task in ("extractive_summarization", "evidence_extraction"):
        return parse_sent_ids(input_string, text)
    return text, bool(text.strip())
