"""Training data for fine-tuning: document fractions, tokenization, mixing, length-grouped plans."""
from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from tasks.plumbing.io import read_jsonl
from trainers.finetuning import data as train_data

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def tokenizer(usb_tokenizer):
    return usb_tokenizer


# ---- document fractions --------------------------------------------------------------------

def test_select_documents_sizes_nesting_and_order_independence():
    documents = [f"domain/doc{i}.json" for i in range(200)]
    chosen = {f: train_data.select_documents(documents, f, seed=3) for f in (0.05, 0.1, 0.2, 1.0)}
    assert [len(chosen[f]) for f in (0.05, 0.1, 0.2, 1.0)] == [10, 20, 40, 200]
    assert chosen[0.05] < chosen[0.1] < chosen[0.2] < chosen[1.0]
    shuffled = list(reversed(documents)) + documents[:50]          # order and repeats ignored
    assert train_data.select_documents(shuffled, 0.1, seed=3) == chosen[0.1]
    assert train_data.select_documents(documents, 0.1, seed=4) != chosen[0.1]
    assert len(train_data.select_documents(documents[:3], 0.01, seed=0)) == 1


def test_build_training_examples_counts_tasks_and_documents(data_dir, tokenizer):
    examples = train_data.build_training_examples(
        ["FAC", "COMP"], "train", "all", str(data_dir), tokenizer, 512, 128)
    fac_rows = read_jsonl(data_dir / "all/factuality_classification/train.jsonl")
    comp_rows = read_jsonl(data_dir / "all/multisentence_compression/train.jsonl")
    assert examples.task_names == ("factuality_classification", "multisentence_compression")
    assert examples.summary()["examples"] == {"factuality_classification": len(fac_rows),
                                              "multisentence_compression": len(comp_rows)}
    assert examples.document_of[:len(fac_rows)] == [row["id"] for row in fac_rows]
    first_target = tokenizer.decode(examples.labels[0], skip_special_tokens=True).strip()
    assert first_target == ("Yes" if fac_rows[0]["label"] == 0 else "No")
    assert all(row[-1] == tokenizer.eos_token_id for row in examples.input_ids + examples.labels)
    assert examples.truncated_inputs == examples.truncated_targets == 0


def test_train_fraction_keeps_whole_documents(data_dir, tokenizer):
    full = train_data.build_training_examples(
        ["FAC"], "train", "all", str(data_dir), tokenizer, 512, 128)
    half = train_data.build_training_examples(
        ["FAC"], "train", "all", str(data_dir), tokenizer, 512, 128, fraction=0.5, seed=1)
    per_document = Counter(full.document_of)
    assert 0 < len(half) < len(full)
    assert half.documents_kept["factuality_classification"] == round(0.5 * len(per_document))
    for document, count in Counter(half.document_of).items():
        assert count == per_document[document]     # every instance of a kept article


def test_truncation_keeps_eos_and_is_counted(data_dir, tokenizer):
    examples = train_data.build_training_examples(
        ["COMP"], "train", "all", str(data_dir), tokenizer, 16, 8)
    assert examples.truncated_inputs == len(examples) > 0
    assert max(examples.source_lengths) == 16 and max(examples.target_lengths) == 8
    assert all(row[-1] == tokenizer.eos_token_id for row in examples.input_ids + examples.labels)


# ---- mixing ----------------------------------------------------------------------------

def test_temperature_counts_known_values():
    assert train_data.temperature_counts({"a": 900, "b": 100}, 1.0) == {"a": 900, "b": 100}
    # rates ∝ sqrt(size): 30 : 10 -> 750 : 250 of 1000
    assert train_data.temperature_counts({"a": 900, "b": 100}, 2.0) == {"a": 750, "b": 250}
    counts = train_data.temperature_counts({"a": 7, "b": 2, "c": 2}, 1e6)
    assert sum(counts.values()) == 11 and sorted(counts.values()) == [3, 4, 4]


def test_epoch_indices_proportional_and_temperature():
    tasks = {"a": np.arange(0, 900), "b": np.arange(900, 1000)}
    once = train_data.epoch_example_indices(tasks, "proportional", 2.0, seed=0, epoch=0)
    assert sorted(once.tolist()) == list(range(1000))
    mixed = train_data.epoch_example_indices(tasks, "temperature", 2.0, seed=0, epoch=0)
    assert int((mixed < 900).sum()) == 750 and int((mixed >= 900).sum()) == 250
    repeats = Counter(mixed[mixed >= 900].tolist())
    assert set(repeats.values()) == {2, 3} and len(repeats) == 100
    again = train_data.epoch_example_indices(tasks, "temperature", 2.0, seed=0, epoch=0)
    other_epoch = train_data.epoch_example_indices(tasks, "temperature", 2.0, seed=0, epoch=1)
    assert np.array_equal(mixed, again) and not np.array_equal(mixed, other_epoch)
    same_as_once = train_data.epoch_example_indices(tasks, "temperature", 1.0, seed=0, epoch=0)
    assert sorted(same_as_once.tolist()) == list(range(1000))


# ---- length-grouped plans ----------------------------------------------------------------

@pytest.fixture(scope="module")
def long_tailed_lengths():
    rng = np.random.default_rng(0)
    sources = np.clip(rng.lognormal(5.5, 0.8, size=1003), 8, 8192).astype(np.int64)
    targets = np.clip(rng.lognormal(3.5, 0.6, size=1003), 2, 768).astype(np.int64)
    return sources, targets


def test_plan_visits_every_example_once_in_full_steps(long_tailed_lengths):
    sources, targets = long_tailed_lengths
    plan = train_data.plan_epoch(np.arange(1003), sources, targets, batch_size=16,
                                 micro_batches=4, seed=0, epoch=0, megabatch_steps=50)
    flat = np.concatenate([piece for step in plan for piece in step])
    assert sorted(flat.tolist()) == list(range(1003))
    sizes = Counter(sum(len(piece) for piece in step) for step in plan)
    assert sizes == {16: 62, 11: 1}                 # 1003 = 62 x 16 + 11
    assert all(len(step) == 4 for step in plan)
    full_pieces = [len(piece) for step in plan for piece in step if sum(map(len, step)) == 16]
    assert set(full_pieces) == {4}


def test_plan_padding_waste_is_small(long_tailed_lengths):
    sources, targets = long_tailed_lengths
    grouped = train_data.plan_epoch(np.arange(1003), sources, targets, 16, 4, 0, 0, 50)
    rng = np.random.default_rng(1)
    random_steps = np.array_split(rng.permutation(1003), 63)
    random_plan = [np.array_split(step, 4) for step in random_steps]
    grouped_efficiency = train_data.padding_efficiency(grouped, sources)
    assert grouped_efficiency > 0.95
    assert train_data.padding_efficiency(random_plan, sources) < 0.6
    step_max = [max(sources[piece].max() for piece in step if len(piece)) for step in grouped]
    assert step_max != sorted(step_max, reverse=True)           # step order is shuffled


def test_plan_depends_only_on_seed_and_epoch(long_tailed_lengths):
    sources, targets = long_tailed_lengths

    def plan(seed, epoch, micro):
        steps = train_data.plan_epoch(np.arange(1003), sources, targets, 16, micro, seed, epoch)
        return [np.concatenate(step).tolist() for step in steps]
    assert plan(0, 0, 4) == plan(0, 0, 4)
    assert plan(0, 0, 4) == plan(0, 0, 2)       # how a step is split never changes it
    assert plan(0, 0, 4) != plan(0, 1, 4) and plan(0, 0, 4) != plan(1, 0, 4)


def test_micro_batches_for_rank_partition_a_short_step():
    step = np.array_split(np.array([5, 6, 7]), 4)          # 3 examples, 2 ranks x 2 accum
    ranks = [train_data.micro_batches_for_rank(step, rank, 2) for rank in (0, 1)]
    assert [len(pieces) for pieces in ranks] == [2, 2]
    assert sorted(np.concatenate([p for pieces in ranks for p in pieces]).tolist()) == [5, 6, 7]
    assert any(len(piece) == 0 for pieces in ranks for piece in pieces)


def test_collate_pads_and_shifts():
    examples = train_data.TrainingExamples(
        input_ids=[[5, 6, 1], [7, 1]], labels=[[8, 9, 1], [4, 1]], task_of=["t", "t"],
        document_of=["d", "e"], task_names=("t",))
    batch = train_data.collate(examples, np.array([0, 1]), pad_token_id=0,
                               decoder_start_token_id=0)
    assert batch["input_ids"].tolist() == [[5, 6, 1], [7, 1, 0]]
    assert batch["attention_mask"].tolist() == [[1, 1, 1], [1, 1, 0]]
    assert batch["labels"].tolist() == [[8, 9, 1], [4, 1, -100]]
    assert batch["decoder_input_ids"].tolist() == [[0, 8, 9], [0, 4, 0]]
    masked = train_data.collate(examples, np.array([1]), 0, 0, zero_weight=True)
    assert masked["labels"].tolist() == [[-100, -100]]


# ---- windows: training sees what prediction sees -----------------------------------------

@pytest.fixture(scope="module")
def long_article_data(tmp_path_factory, data_dir):
    """A data folder whose EXT train split holds one article 8 times the fixture's longest."""
    from tasks.plumbing.io import write_jsonl

    rows = read_jsonl(data_dir / "all/extractive_summarization/train.jsonl")
    longest = max(rows, key=lambda row: len(row["input_lines"]))
    long = dict(longest, id="long/doc.json", input_lines=longest["input_lines"] * 8,
                labels=longest["labels"] * 8)
    folder = tmp_path_factory.mktemp("long-data")
    write_jsonl(folder / "all/extractive_summarization/train.jsonl", [long])
    return folder


def test_training_windows_are_the_prediction_windows(long_article_data, tokenizer):
    from tasks import get_task
    from trainers.finetuning.evaluation import validation_predict_spec
    from trainers.finetuning.profiles import get_profile
    from trainers.inference.generation import encode_sources
    from trainers.inference.predict import PredictSpec, format_windows

    spec = get_profile("flan-t5-large")                 # 8192 input tokens, windows of 1024
    assert (spec.window_tokens, spec.window_budget) == (1024, 1024)
    examples = train_data.spec_examples(spec, ["EXT"], "train", long_article_data, tokenizer)
    task = get_task("EXT")
    instances = task.instances(task.load("train", "all", str(long_article_data)))
    for predict_spec in (PredictSpec(device="cpu"), validation_predict_spec(spec, "cpu")):
        windows = format_windows(task, instances, tokenizer, predict_spec)
        encoded = encode_sources(tokenizer, [w.model_input.source for w in windows],
                                 predict_spec.max_input_tokens)
        assert [list(row.input_ids) for row in encoded] == examples.input_ids
    assert len(examples) > 1 and max(examples.source_lengths) <= 1024
    assert examples.truncated_targets == 0
    whole = train_data.build_training_examples(["EXT"], "train", "all", str(long_article_data),
                                               tokenizer, 8192, 768)
    assert len(whole) == 1                            # without the window budget: one window
    small = train_data.spec_examples(get_profile("tiny"), ["EXT"], "train", long_article_data,
                                     tokenizer)
    assert max(small.source_lengths) <= 256 and small.truncated_inputs == 0


def test_examples_digest_follows_ids_sources_and_targets(data_dir, tokenizer):
    first = train_data.training_texts(["FAC"], "train", "all", str(data_dir), tokenizer, 512)
    again = train_data.training_texts(["FAC"], "train", "all", str(data_dir), tokenizer, 512)
    assert first.digest() == again.digest() and len(first.digest()) == 64
    for field in ("targets", "sources", "document_of"):
        changed = train_data.training_texts(["FAC"], "train", "all", str(data_dir), tokenizer,
                                            512)
        getattr(changed, field)[3] += "x"
        assert changed.digest() != first.digest(), field
    examples = train_data.build_training_examples(["FAC"], "train", "all", str(data_dir),
                                                  tokenizer, 512, 128)
    assert examples.digest == first.digest()
