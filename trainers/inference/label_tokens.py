"""The label words of Yes/No tasks as token ids, and the Yes-vs-No probability of a step.

p = P(Yes) / (P(Yes) + P(No)), computed from a step's scores, equals the ratio of the two
vocabulary-softmax probabilities (see trainers.inference.label_probs for which steps are labels).
"""
from __future__ import annotations

from dataclasses import dataclass

from tasks.plumbing.errors import SumbenchError


@dataclass(frozen=True)
class LabelTokens:
    """The token ids of the label words as they appear in targets ("Yes" / "SENT0 Yes")."""
    yes_id: int
    no_id: int


def label_token_ids(tokenizer) -> LabelTokens:
    """Find the single tokens "Yes" and "No" as the targets tokenize them."""
    found = {}
    for word in ("Yes", "No"):
        alone = tokenizer(word, add_special_tokens=False)["input_ids"]
        after_marker = tokenizer(f"SENT0 {word}", add_special_tokens=False)["input_ids"]
        if (len(alone) != 1 or alone[0] == tokenizer.unk_token_id or not after_marker
                or after_marker[-1] != alone[0]):
            pieces = tokenizer.convert_ids_to_tokens(alone), \
                tokenizer.convert_ids_to_tokens(after_marker)
            raise SumbenchError(
                f"the tokenizer does not encode the label word {word!r} as one token that is "
                f"the same alone and after a SENT marker (got {pieces[0]} and {pieces[1]}); "
                f"Yes/No probabilities cannot be read off this model")
        found[word] = alone[0]
    return LabelTokens(found["Yes"], found["No"])


def renormalised_yes(scores, labels: LabelTokens):
    """p(Yes) / (p(Yes) + p(No)) for each row of a [rows, vocab] score tensor (float32)."""
    import torch

    pair = scores[..., [labels.yes_id, labels.no_id]].float()
    return torch.softmax(pair, dim=-1)[..., 0]


class YesNoRecorder:
    """A logits processor that changes nothing and records the Yes-vs-No probability of every
    row at every step (placed last, it sees the scores that choose the token)."""

    def __init__(self, labels: LabelTokens):
        self.labels = labels
        self.steps: list = []

    def __call__(self, input_ids, scores):
        self.steps.append(renormalised_yes(scores, self.labels))
        return scores

    def per_row(self) -> list[list[float]]:
        import torch

        if not self.steps:
            return []
        return torch.stack(self.steps, dim=1).cpu().tolist()


def label_offsets(tokenizer, token_ids, step_probabilities, labels: LabelTokens,
                  text_length: int | None = None) -> dict[int, float]:
    """{character offset of the word in the decoded `token_ids`: p(Yes)} at every step whose
    generated token is the Yes or the No token (`step_probabilities[step]` as a recorder gave
    it); a token's leading space is not part of its word. Offsets are of
    `tokenizer.decode(token_ids, skip_special_tokens=True)`; those at or past `text_length`
    (the text was cut there) are left out."""
    found: dict[int, float] = {}
    ids = list(token_ids)
    for step, token in enumerate(ids):
        if token not in (labels.yes_id, labels.no_id) or step >= len(step_probabilities):
            continue
        before = tokenizer.decode(ids[:step], skip_special_tokens=True)
        upto = tokenizer.decode(ids[:step + 1], skip_special_tokens=True)
        if not upto.startswith(before):
            continue                  # the decoder rewrote earlier text: no offset to give
        piece = upto[len(before):]
        offset = len(before) + len(piece) - len(piece.lstrip())
        if text_length is None or offset < text_length:
            found[offset] = float(step_probabilities[step])
    return found
