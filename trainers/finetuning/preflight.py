"""Checks run before the first training step: everything that would otherwise fail only after
training (and its hours on a GPU) is refused at once, as a one-line error.

- Label words: a task scored by label probabilities (FAC, EXT, EVEXT) needs "Yes" and "No"
  as single tokens (trainers.inference.label_tokens), which prediction reads after training.
- Model and tokenizer fit: every token id of the tokenizer has a row in the model's
  embedding table.
- Window budgets: a model with absolute positions (`max_position_embeddings`) cannot read
  more tokens than it has positions, in training or in the prediction that follows
  (`sumbench run` predicts with `trainers.finetuning.profiles.prediction_budgets`).
"""
from __future__ import annotations

from collections.abc import Sequence

from tasks import get_task
from tasks.plumbing.errors import SumbenchError
from trainers.fewshot.backends import context_positions
from trainers.finetuning.profiles import SpecError
from trainers.inference.label_tokens import label_token_ids


def check_before_training(model, tokenizer, task_names: Sequence[str], max_input_tokens: int,
                          max_target_tokens: int,
                          prediction_budgets: tuple[int, int] | None = None) -> None:
    """Raise the first problem found (label words, tokenizer fit, budgets), else nothing."""
    scored_by_labels = [name for name in task_names
                        if get_task(name).output_kind == "probabilities"]
    if scored_by_labels:
        try:
            label_token_ids(tokenizer)
        except SumbenchError as error:
            raise SpecError(f"{error} (needed by {', '.join(scored_by_labels)}; checked "
                            f"before training)") from None
    rows = model.get_input_embeddings().num_embeddings
    if len(tokenizer) > rows:
        raise SpecError(f"the tokenizer has {len(tokenizer)} tokens but the model's embedding "
                        f"table only {rows} rows: they do not belong together")
    positions = context_positions(model.config)
    budgets = [("training input", max_input_tokens), ("training target", max_target_tokens)]
    if prediction_budgets is not None:
        budgets += [("prediction input", prediction_budgets[0]),
                    ("prediction output", prediction_budgets[1])]
    for what, tokens in budgets:
        if positions is not None and tokens > positions:
            raise SpecError(f"the {what} budget is {tokens} tokens but the model has "
                            f"{positions} positions (max_position_embeddings); lower the "
                            f"budget or use a model with relative positions")

