"""SGUs of references through sumbench's few-shot backends, with the SCU-approximation
study's prompt (tasks.units.sgu_prompt):

- an OpenAI-compatible chat endpoint (OpenAI, vLLM's server, ...): the paper's messages as
  they are, `temperature: 0` and nothing else, as the official run sent them;
- a completions endpoint, or a Hugging Face causal or seq2seq model: the messages through
  the tokenizer's chat template where it has one, else as one text (`plain_prompt`), decoded
  greedily up to `max_new_tokens`.

Replies are cached by the client or backend (`cache`), requests run `workers` at a time,
and a request is tried a bounded number of times (the official code retries forever): a
reference whose request still fails is recorded as failed, with the error, and gets no
units; the run goes on.
"""
from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from tasks.plumbing.errors import SumbenchError
from tasks.units.sgu_prompt import (
    OneShot,
    clean_units,
    messages,
    official_units,
    plain_prompt,
    reply_status,
)
from trainers.fewshot.chat_client import reply_text
from trainers.fewshot.prompts import Prompt


@dataclass(frozen=True)
class SguRecord:
    """One reference's reply and units (status: ok, empty, not a split, failed)."""
    reply: str
    units: tuple[str, ...]
    status: str
    error: str | None = None

    def to_dict(self) -> dict:
        return {"reply": self.reply, "sgus": list(self.units), "status": self.status,
                **({"error": self.error} if self.error else {})}


def read_reply(reply: str, clean: bool) -> SguRecord:
    units = official_units(reply)
    if clean:
        units = clean_units(units)
    return SguRecord(reply, tuple(units), reply_status(reply, units))


def chat_reply(client, reference: str, shot: OneShot) -> str:
    """One reference's reply from an OpenAI-compatible client (chat or completions)."""
    chat = messages(reference, shot)
    sent = chat if client.endpoint == "chat" else plain_prompt(chat)
    return reply_text(client.chat(sent, temperature=0)) or ""


def chat_sgus(client, references: Sequence[str], shot: OneShot, *, workers: int = 1,
              clean: bool = False, progress=None) -> list[SguRecord]:
    """Every reference's SGUs from `client`, `workers` requests at a time."""
    def one(reference: str) -> SguRecord:
        try:
            record = read_reply(chat_reply(client, reference, shot), clean)
        except SumbenchError as error:
            record = SguRecord("", (), "failed", str(error).splitlines()[0][:300])
        if progress is not None:
            progress.update(1)
        return record

    with ThreadPoolExecutor(max(1, int(workers))) as pool:
        return list(pool.map(one, references))


def model_prompt(tokenizer, chat: list[dict]) -> str:
    """The messages through the tokenizer's chat template, else as one text."""
    if getattr(tokenizer, "chat_template", None):
        return tokenizer.apply_chat_template(chat, tokenize=False, add_generation_prompt=True)
    return plain_prompt(chat)


def model_sgus(backend, references: Sequence[str], shot: OneShot, *,
               max_new_tokens: int = 512, clean: bool = False) -> list[SguRecord]:
    """Every reference's SGUs from a Hugging Face backend (greedy, cached by the backend)."""
    prompts = [Prompt(model_prompt(backend.tokenizer, messages(reference, shot)), None, "",
                      (), "") for reference in references]
    replies = backend.generate(prompts, [max_new_tokens] * len(prompts))
    return [read_reply(reply, clean) for reply in replies]
