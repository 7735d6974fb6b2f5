"""Model fingerprints (trainers.inference.prediction_io.model_fingerprint, the digests of
trainers.models.disk_cache): by content (every weight byte, the config, the tokenizer), never by the
folder a model was loaded from, so a prediction run moved with its model is reused."""
from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import AutoTokenizer, ByT5Tokenizer

from tasks import get_task
from trainers.inference.predict import PredictSpec, load_model, run_task
from trainers.inference.prediction_io import model_fingerprint
from trainers.models.disk_cache import tensor_blocks, tokenizer_digest, weights_digest
from trainers.models.tiny import build_tiny_t5

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def saved(tmp_path_factory, fac_tokenizer):
    """A tiny T5 and its tokenizer saved in a folder."""
    folder = tmp_path_factory.mktemp("model") / "tiny-t5"
    build_tiny_t5(fac_tokenizer, save_dir=folder, seed=5)
    return folder


def differing(first: dict, second: dict) -> set[str]:
    return {key for key in first.keys() | second.keys() if first.get(key) != second.get(key)}


def test_one_weight_beyond_the_first_1024_values_changes_it(saved):
    model, tokenizer, _ = load_model(str(saved))
    other = copy.deepcopy(model)
    name, tensor = max(other.state_dict().items(), key=lambda item: item[1].numel())
    assert tensor.numel() > 1024
    with torch.no_grad():
        flat = tensor.view(-1)
        flat[-1] = torch.nextafter(flat[-1], torch.tensor(float("inf")))  # one ulp
    assert not torch.equal(other.state_dict()[name], model.state_dict()[name])
    for ours, theirs in zip(model.state_dict().values(), other.state_dict().values()):
        assert torch.equal(ours.reshape(-1)[:1024], theirs.reshape(-1)[:1024])
    assert differing(model_fingerprint(model, tokenizer),
                     model_fingerprint(other, tokenizer)) == {"weights"}


def test_dtype_and_config_change_it(saved):
    model, tokenizer, _ = load_model(str(saved))
    before = model_fingerprint(model, tokenizer)
    halved = copy.deepcopy(model).to(torch.bfloat16)
    assert differing(before, model_fingerprint(halved, tokenizer)) == {"weights"}
    beams = copy.deepcopy(model)
    beams.generation_config.num_beams = 3
    assert differing(before, model_fingerprint(beams, tokenizer)) == {"config"}


def test_the_same_model_from_two_folders_has_one_fingerprint(saved, tmp_path):
    copied = shutil.copytree(saved, tmp_path / "elsewhere" / "copy")
    first, second = load_model(str(saved)), load_model(str(copied))
    assert first[2]["model"] == str(saved.resolve()) != second[2]["model"]  # load info differs
    fingerprint = model_fingerprint(first[0], first[1])
    assert fingerprint == model_fingerprint(second[0], second[1])
    assert fingerprint["parameters"] == sum(t.numel() for t in first[0].state_dict().values())
    text = json.dumps(fingerprint)
    assert str(saved.parent) not in text and "elsewhere" not in text


def test_a_changed_tokenizer_changes_it_and_encoding_calls_do_not(saved):
    model, tokenizer, _ = load_model(str(saved))
    before = model_fingerprint(model, tokenizer)
    tokenizer(["Port Alden opened a second branch.", "x"], truncation=True, max_length=3,
              padding=True)
    assert json.loads(tokenizer.backend_tokenizer.to_str())["truncation"] is not None
    assert model_fingerprint(model, tokenizer) == before  # the state left behind is ignored
    added = AutoTokenizer.from_pretrained(saved)
    added.add_tokens(["Alden"])
    shorter = AutoTokenizer.from_pretrained(saved, model_max_length=512)
    digests = {before["tokenizer"], tokenizer_digest(added), tokenizer_digest(shorter)}
    assert len(digests) == 3 and model_fingerprint(model)["tokenizer"] is None


def test_a_python_tokenizer_is_fingerprinted_by_its_vocabulary():
    plain = tokenizer_digest(ByT5Tokenizer())
    assert tokenizer_digest(ByT5Tokenizer()) == plain
    assert tokenizer_digest(ByT5Tokenizer(extra_ids=10)) != plain


def test_tensor_blocks_are_the_row_major_bytes_of_any_tensor():
    values = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    blocks = list(tensor_blocks(values, chunk_bytes=10))  # 2 values (8 bytes) a block
    assert [block.nbytes for block in blocks] == [8] * 12
    assert np.shares_memory(blocks[0], values.numpy())  # a contiguous tensor is not copied
    transposed = values.t()
    assert not transposed.is_contiguous()
    assert b"".join(bytes(b) for b in tensor_blocks(transposed, chunk_bytes=10)) \
        == transposed.contiguous().numpy().tobytes()
    halves = values.to(torch.bfloat16)
    assert b"".join(bytes(b) for b in tensor_blocks(halves)) \
        == halves.view(torch.int16).numpy().tobytes()


def test_weights_digest_covers_names_and_shapes():
    flat, square = torch.nn.Linear(4, 4), torch.nn.Linear(4, 4)
    with torch.no_grad():
        square.weight.copy_(flat.weight)
        square.bias.copy_(flat.bias)
    assert weights_digest(flat) == weights_digest(square)
    with torch.no_grad():
        square.weight.data = square.weight.data.reshape(2, 8)  # same bytes, another shape
    assert weights_digest(flat) != weights_digest(square)
    renamed = torch.nn.Sequential(flat)
    assert weights_digest(renamed) != weights_digest(flat)


def test_a_prediction_run_moved_with_its_model_is_reused(saved, tmp_path, fac_test_records):
    task = get_task("FAC")
    instances = task.instances(fac_test_records)[:4]
    spec = PredictSpec(batch_size=2, max_new_tokens=2, device="cpu")
    first = tmp_path / "first"
    shutil.copytree(saved, first / "model")
    model, tokenizer, info = load_model(str(first / "model"))
    done = run_task(task, instances, model, tokenizer, spec, first / "out", model_info=info)
    assert done.counts["computed"] == done.counts["windows"] == len(instances)
    moved = Path(shutil.move(first, tmp_path / "moved"))
    model, tokenizer, info = load_model(str(moved / "model"))
    again = run_task(task, instances, model, tokenizer, spec, moved / "out", model_info=info)
    assert again.counts["computed"] == 0 and again.counts["resumed"] == len(instances)
    assert again.records == done.records
