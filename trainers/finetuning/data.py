"""Training data for the fine-tuning runner: task instances -> token ids -> batch plans.

Only the `Task` interface is used (load, instances, group_key, format). Three pure pieces:

* `build_training_examples` tokenizes every model input of the chosen tasks, optionally keeping a
  seeded fraction of the source *documents* (so all windows / sentences / claims of one article
  stay together, and smaller fractions are subsets of larger ones). Windowed tasks are cut with
  the same window budget as prediction (`FinetuneSpec.window_budget`); the examples carry a
  digest of their (task, document, source, target) texts, which a resumed run must match.
* `epoch_example_indices` decides which examples an epoch visits: each once ("proportional"
  mixing, i.e. tasks weighted by their size) or temperature-scaled task rates (T5's mixing).
* `plan_epoch` cuts an epoch into optimizer steps of `batch_size` examples with length grouping:
  a seeded shuffle, sorting inside windows of `megabatch_steps` steps, then a seeded shuffle of
  the step order. Everything derives from (seed, epoch), so a resumed run replays it exactly.
"""
from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import tasks as task_registry
from tasks.plumbing.errors import SumbenchError
from trainers.models.padding import right_padded, row_mask

LABEL_PAD = -100


@dataclass
class TrainingExamples:
    """Tokenized seq2seq examples of one or more tasks, in task order then instance order."""

    input_ids: list[list[int]]
    labels: list[list[int]]
    task_of: list[str]
    document_of: list[str]
    task_names: tuple[str, ...]
    truncated_inputs: int = 0
    truncated_targets: int = 0
    documents_kept: dict[str, int] = field(default_factory=dict)
    digest: str = ""                      # `TrainingTexts.digest` of the texts tokenized

    def __len__(self) -> int:
        return len(self.input_ids)

    @property
    def source_lengths(self) -> np.ndarray:
        return np.fromiter((len(ids) for ids in self.input_ids), dtype=np.int64,
                           count=len(self.input_ids))

    @property
    def target_lengths(self) -> np.ndarray:
        return np.fromiter((len(ids) for ids in self.labels), dtype=np.int64,
                           count=len(self.labels))

    def task_indices(self) -> dict[str, np.ndarray]:
        tasks = np.asarray(self.task_of)
        return {name: np.flatnonzero(tasks == name) for name in self.task_names}

    def summary(self) -> dict[str, Any]:
        return {"examples": {name: int(len(idx)) for name, idx in self.task_indices().items()},
                "documents": dict(self.documents_kept),
                "truncated_inputs": self.truncated_inputs,
                "truncated_targets": self.truncated_targets}


# ---- tasks -> examples -------------------------------------------------------------------

def resolve_tasks(task_specs: Sequence[Any], variant: str = "all") -> list:
    """Task objects for names, aliases ("T1,T2" allowed) or Task instances; "all" alone =
    every task of the default suite (USB) with `variant` (tasks.parse_task_list). A task
    listed twice is a SumbenchError."""
    strings = [spec for spec in task_specs if isinstance(spec, str)]
    if strings:
        task_registry.parse_task_list(strings)  # a repeat, "all" mixed with names
    resolved = []
    for spec in task_specs:
        if not isinstance(spec, str):
            resolved.append(spec)
            continue
        found = [task_registry.get_task(name) for name in task_registry.parse_task_list([spec])]
        if task_registry.means_all_tasks([spec]):
            found = [task for task in found if variant in getattr(task, "variants", ())]
        resolved.extend(found)
    names = [task.name for task in resolved]
    repeated = [name for name in dict.fromkeys(names) if names.count(name) > 1]
    if repeated:
        raise SumbenchError(f"a task is listed twice: {', '.join(repeated)}")
    return resolved


def select_documents(document_ids: Sequence[str], fraction: float, seed: int) -> set[str]:
    """A seeded subset of round(fraction x #documents) documents (at least one).

    Each document gets a key hashed from (seed, id); the lowest keys win. The choice therefore
    does not depend on record order, is the same for every task sharing the documents, and a
    smaller fraction always selects a subset of a larger one (nested data-size studies).
    """
    unique = sorted(set(document_ids))
    if fraction >= 1.0:
        return set(unique)
    keep = max(1, int(round(fraction * len(unique))))
    ranked = sorted(unique, key=lambda doc: _document_key(seed, doc))
    return set(ranked[:keep])


def _document_key(seed: int, document_id: str) -> bytes:
    return hashlib.blake2b(f"{seed}\x00{document_id}".encode(), digest_size=16).digest()


@dataclass
class TrainingTexts:
    """The model inputs of the chosen documents, as text: one entry per window."""

    sources: list[str]
    targets: list[str]
    task_of: list[str]
    document_of: list[str]
    task_names: tuple[str, ...]
    documents_kept: dict[str, int]

    def digest(self) -> str:
        """sha256 over every example's (task, document id, source, target), in order."""
        sha = hashlib.sha256()
        for row in zip(self.task_of, self.document_of, self.sources, self.targets):
            sha.update(json.dumps(row, ensure_ascii=False).encode("utf-8") + b"\n")
        return sha.hexdigest()


def training_texts(task_names: Sequence[Any], split: str, variant: str, data_dir: str | None,
                   tokenizer, window_tokens: int, fraction: float = 1.0,
                   seed: int = 0) -> TrainingTexts:
    """Every model input (window of `window_tokens`) of the tasks' `split` instances whose
    document is among the seeded `fraction` of documents."""
    from tqdm.auto import tqdm

    texts = TrainingTexts([], [], [], [], (), {})
    tasks = resolve_tasks(task_names, variant)
    texts.task_names = tuple(task.name for task in tasks)
    for task in tasks:
        instances = task.instances(task.load(split, variant, data_dir))
        documents = [task.group_key(instance) for instance in instances]
        chosen = select_documents(documents, fraction, seed)
        texts.documents_kept[task.name] = len(chosen)
        pairs = zip(instances, documents)
        for instance, document in tqdm(pairs, total=len(instances), disable=None,
                                       desc=f"formatting {task.name}/{split}", leave=False):
            if document not in chosen:
                continue
            for model_input in task.format(instance, tokenizer, window_tokens):
                texts.sources.append(model_input.source)
                texts.targets.append(model_input.target)
                texts.task_of.append(task.name)
                texts.document_of.append(document)
    return texts


def build_training_examples(task_names: Sequence[Any], split: str, variant: str,
                            data_dir: str | None, tokenizer, max_input_tokens: int,
                            max_output_tokens: int, fraction: float = 1.0,
                            seed: int = 0, window_tokens: int | None = None) -> TrainingExamples:
    """Tokenized examples of every model input (window) of the tasks' `split` instances.

    Windowed tasks get windows of min(window_tokens, max_input_tokens) tokens (None:
    max_input_tokens); pass the prediction window budget so training sees the same windows.
    """
    budget = min(window_tokens or max_input_tokens, max_input_tokens)
    texts = training_texts(task_names, split, variant, data_dir, tokenizer, budget, fraction,
                           seed)
    input_ids, cut_inputs = tokenize_texts(tokenizer, texts.sources, max_input_tokens)
    labels, cut_targets = tokenize_texts(tokenizer, texts.targets, max_output_tokens)
    return TrainingExamples(input_ids, labels, texts.task_of, texts.document_of,
                            texts.task_names, cut_inputs, cut_targets, texts.documents_kept,
                            texts.digest())


def spec_examples(spec: Any, task_names: Sequence[Any], split: str, data_dir: Any,
                  tokenizer) -> TrainingExamples:
    """The examples a `FinetuneSpec` trains on ("train": its seeded `train_fraction`) or
    validates on (any other split: every document), windows of `spec.window_budget`."""
    fraction = spec.train_fraction if split == "train" else 1.0
    return build_training_examples(
        task_names, split, spec.variant, None if data_dir is None else str(data_dir), tokenizer,
        spec.max_input_tokens, spec.max_output_tokens, fraction, spec.seed,
        window_tokens=spec.window_budget)


def tokenize_texts(tokenizer, texts: Sequence[str], max_tokens: int) -> tuple[list[list[int]], int]:
    """Token ids (with the tokenizer's special tokens), truncated to `max_tokens`; and how many
    texts had to be truncated (truncation keeps the end-of-sequence token)."""
    if not texts:
        return [], 0
    ids = tokenizer(list(texts), verbose=False)["input_ids"]
    too_long = [i for i, row in enumerate(ids) if len(row) > max_tokens]
    if too_long:
        cut = tokenizer([texts[i] for i in too_long], truncation=True,
                        max_length=max_tokens)["input_ids"]
        for i, row in zip(too_long, cut):
            ids[i] = row
    return [list(row) for row in ids], len(too_long)


# ---- epochs, mixing and length-grouped steps ---------------------------------------------

def temperature_counts(sizes: dict[str, int], temperature: float) -> dict[str, int]:
    """Examples per task in one epoch of sum(sizes) examples, with rates ∝ size^(1/T).

    T = 1 reproduces proportional mixing; larger T moves towards equal shares. Rounding uses
    largest remainders (ties by task order) so the counts add up exactly.
    """
    names = [name for name in sizes if sizes[name] > 0]
    total = sum(sizes[name] for name in names)
    weights = np.array([sizes[name] ** (1.0 / temperature) for name in names], dtype=np.float64)
    exact = total * weights / weights.sum()
    counts = np.floor(exact).astype(np.int64)
    remainder_order = sorted(range(len(names)), key=lambda i: (-(exact[i] - counts[i]), i))
    for i in remainder_order[: total - int(counts.sum())]:
        counts[i] += 1
    return {name: int(count) for name, count in zip(names, counts)}


def epoch_example_indices(task_indices: dict[str, np.ndarray], mixing: str, temperature: float,
                          seed: int, epoch: int) -> np.ndarray:
    """The example indices one epoch visits (order is decided later by `plan_epoch`)."""
    if mixing == "proportional" or len(task_indices) == 1:
        return np.concatenate([np.asarray(idx, dtype=np.int64) for idx in task_indices.values()])
    if mixing != "temperature":
        raise ValueError(f"unknown mixing {mixing!r}")
    rng = np.random.default_rng([seed, epoch, 7])
    counts = temperature_counts({name: len(idx) for name, idx in task_indices.items()},
                                temperature)
    chosen = []
    for name, count in counts.items():
        indices = np.asarray(task_indices[name], dtype=np.int64)
        copies, rest = divmod(count, len(indices))
        chosen.append(np.tile(indices, copies))
        chosen.append(np.sort(rng.choice(indices, size=rest, replace=False)))
    return np.concatenate(chosen)


def plan_epoch(indices: np.ndarray, source_lengths: np.ndarray, target_lengths: np.ndarray,
               batch_size: int, micro_batches: int, seed: int, epoch: int,
               megabatch_steps: int = 50) -> list[list[np.ndarray]]:
    """`epoch_steps`, each split into `micro_batches` pieces of (nearly) equal counts.
    Only the last step can be short; its pieces may then be empty (callers treat an empty
    piece as a zero-weight batch so every process still takes part in each step)."""
    return [np.array_split(step, micro_batches) for step in epoch_steps(
        indices, source_lengths, target_lengths, batch_size, seed, epoch, megabatch_steps)]


def epoch_steps(indices: np.ndarray, source_lengths: np.ndarray, target_lengths: np.ndarray,
                batch_size: int, seed: int, epoch: int,
                megabatch_steps: int = 50) -> list[np.ndarray]:
    """Optimizer steps of `batch_size` examples (the last one may be short), in order.

    Examples are shuffled, sorted by (source, target) length inside windows of
    `megabatch_steps` steps, cut into steps of neighbouring lengths, and the steps are shuffled.
    How a step is then cut into micro-batches (trainers.finetuning.micro_batches) never
    changes which examples it holds.
    """
    rng = np.random.default_rng([seed, epoch])
    shuffled = rng.permutation(np.asarray(indices, dtype=np.int64))
    window = batch_size * megabatch_steps
    steps: list[np.ndarray] = []
    for start in range(0, len(shuffled), window):
        chunk = shuffled[start:start + window]
        order = np.lexsort((-target_lengths[chunk], -source_lengths[chunk]))
        chunk = chunk[order]
        steps.extend(chunk[i:i + batch_size] for i in range(0, len(chunk), batch_size))
    step_order = rng.permutation(len(steps))
    return [steps[i] for i in step_order]


def micro_batches_for_rank(step: list[np.ndarray], rank: int, world_size: int) -> list[np.ndarray]:
    """The pieces of one step a process runs: interleaved, so ranks get similar lengths."""
    return step[rank::world_size]


def padding_efficiency(plan: list[list[np.ndarray]], lengths: np.ndarray) -> float:
    """Real tokens / padded tokens over all (non-empty) micro-batches of a plan."""
    real = padded = 0
    for step in plan:
        for piece in step:
            if len(piece):
                real += int(lengths[piece].sum())
                padded += int(lengths[piece].max()) * len(piece)
    return real / padded if padded else 1.0


def collate(examples: TrainingExamples, indices: np.ndarray, pad_token_id: int,
            decoder_start_token_id: int, zero_weight: bool = False) -> dict[str, Any]:
    """Tensors padded to the longest example of the batch; labels padded with -100.

    `zero_weight` masks every label (a placeholder batch that contributes no loss).
    """
    import torch

    sources = [examples.input_ids[i] for i in indices]
    targets = [examples.labels[i] for i in indices]
    target_len = max(len(row) for row in targets)
    labels = np.full((len(targets), target_len), LABEL_PAD, dtype=np.int64) if zero_weight \
        else right_padded(targets, LABEL_PAD)
    decoder_ids = right_padded([[decoder_start_token_id, *target[:-1]] for target in targets],
                               pad_token_id, target_len)
    return {"input_ids": torch.from_numpy(right_padded(sources, pad_token_id)),
            "attention_mask": torch.from_numpy(row_mask(sources)),
            "decoder_input_ids": torch.from_numpy(decoder_ids),
            "labels": torch.from_numpy(labels)}
