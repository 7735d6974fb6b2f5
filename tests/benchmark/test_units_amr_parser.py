"""`sumbench units smus --amr-parser`: amrlib 0.8.1's own parse_xfm inference (4 beams, the first
beam its PenmanDeSerializer turns into a graph) on a tiny BART parser trained here, on the CPU
from a fixed seed, to write the PenmanSerializer strings of two known graphs: the graphs amrlib
returns, with their `# ::snt` lines, and the sg2 trees of them; a sentence amrlib cannot parse
is the command's one-line error, naming the references file, line and sentence."""
from __future__ import annotations

import json
import shutil

import pytest

from tasks.units.amr_units import sentence_subgraphs

from helpers import sumbench

pytest.importorskip("amrlib", reason="--amr-parser runs amrlib's parse_xfm inference: amrlib is "
                                     "not installed")

pytestmark = pytest.mark.usefixtures("one_torch_thread")

#: sentence -> its graph; no word of a sentence is a token of a graph
WANT, GIVE = "The boys want to see girls .", "Boys quickly gave girls toys ."
GRAPHS = {WANT: "(w / want-01 :ARG0 (b / boy) :ARG1 (s / see-01 :ARG0 b :ARG1 (g / girl)))",
          GIVE: "(g / give-01 :ARG0 (b / boy) :ARG1 (t / toy) :ARG2 (g2 / girl) "
                ":manner (q / quick-02))"}
#: the graphs amrlib gives back (its deserializer's variables and indentation)
PARSED = {WANT: "(w / want-01\n      :ARG0 (b / boy)\n      :ARG1 (s / see-01\n"
                "            :ARG0 b\n            :ARG1 (g / girl)))",
          GIVE: "(g / give-01\n      :ARG0 (b / boy)\n      :ARG1 (t / toy)\n"
                "      :ARG2 (g2 / girl)\n      :manner (q / quick-02))"}
#: a sentence spelt in the graphs' concepts and parentheses (see `strict_parser`)
UNPARSABLE = "( ) boy girl give-01 quick-02 see-01 toy want-01"
REFERENCES = [f"<t> {WANT} </t> <t> {GIVE} </t>", f"<t> {GIVE} </t>"]


def graph_strings() -> dict[str, str]:
    """sentence -> the training target: PenmanSerializer's string of its graph (the
    unparsable sentence: two roles, so that its beams end at once)."""
    from amrlib.models.parse_xfm.penman_serializer import PenmanSerializer

    targets = {s: PenmanSerializer(graph).get_graph_string() for s, graph in GRAPHS.items()}
    return {**targets, UNPARSABLE: ":ARG0 :ARG1"}


def word_tokenizer(texts):
    """A word-level tokenizer over the whitespace tokens of `texts` (BART's special ids)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = sorted({word for text in texts for word in text.split()})
    vocab = {word: i for i, word in enumerate(["<s>", "<pad>", "</s>", "<unk>", *words])}
    backend = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=backend, bos_token="<s>", eos_token="</s>",
                                   pad_token="<pad>", unk_token="<unk>",
                                   clean_up_tokenization_spaces=False)


def trained_bart(tokenizer, targets: dict[str, str], steps: int = 100):
    """A one-layer BART (seed 0, no dropout) trained with Adam until it writes each target."""
    import torch
    from transformers import BartConfig, BartForConditionalGeneration

    config = BartConfig(vocab_size=len(tokenizer), d_model=64, encoder_layers=1,
                        decoder_layers=1, encoder_attention_heads=4, decoder_attention_heads=4,
                        encoder_ffn_dim=128, decoder_ffn_dim=128, dropout=0.0,
                        attention_dropout=0.0, activation_dropout=0.0)
    with torch.random.fork_rng():
        torch.manual_seed(0)
        model = BartForConditionalGeneration(config)
    inputs = tokenizer(list(targets), padding=True, return_tensors="pt")
    labels = [tokenizer(target)["input_ids"] + [tokenizer.eos_token_id]
              for target in targets.values()]
    width = max(map(len, labels))
    labels = torch.tensor([row + [-100] * (width - len(row)) for row in labels])
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(steps):
        optimizer.zero_grad()
        model(**inputs, labels=labels).loss.backward()
        optimizer.step()
    return model.eval()


@pytest.fixture(scope="module")
def parser(tmp_path_factory, one_torch_thread):
    """A parse_xfm model folder as amrlib's load_stog_model reads it."""
    folder = tmp_path_factory.mktemp("parse_xfm")
    targets = graph_strings()
    tokenizer = word_tokenizer([*targets, *targets.values()])
    model = trained_bart(tokenizer, targets)
    model.config.task_specific_params = {"parse_amr": {
        "model_name_or_path": str(folder), "max_in_len": 64, "max_out_len": 64}}
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    (folder / "amrlib_meta.json").write_text(json.dumps({
        "model_type": "stog", "version": "0.1.0", "inference_module": ".parse_xfm.inference",
        "inference_class": "Inference", "model_fn": "model.safetensors", "kwargs": {}}))
    return folder


@pytest.fixture(scope="module")
def strict_parser(parser, tmp_path_factory):
    """The parser with its generation config (which amrlib's generate() call keeps) narrowed:
    graph tokens only, two at least, none of its input's. For UNPARSABLE that leaves the roles,
    so every beam starts with one, which PenmanDeSerializer cannot attach: amrlib returns no
    graph for it, whatever the weights; the other sentences parse as before."""
    folder = shutil.copytree(parser, tmp_path_factory.mktemp("strict") / "parse_xfm")
    vocab = json.loads((folder / "tokenizer.json").read_text())["model"]["vocab"]
    graph_tokens = {token for target in graph_strings().values() for token in target.split()}
    settings = json.loads((folder / "generation_config.json").read_text())
    settings.update(encoder_no_repeat_ngram_size=1, min_new_tokens=2, suppress_tokens=sorted(
        i for token, i in vocab.items() if token not in graph_tokens | {"</s>"}))
    (folder / "generation_config.json").write_text(json.dumps(settings))
    return folder


def test_amrlib_parses_each_sentence_and_its_graphs_make_the_trees(parser, tmp_path, capsys):
    references, out = tmp_path / "references.txt", tmp_path / "trees.json"
    references.write_text("".join(line + "\n" for line in REFERENCES))
    code, printed, err = sumbench(capsys, "units", "smus", "--amr-parser", parser,
                                  "--references", references, "--trees-out", out)
    assert code == 0, err
    records, sentences = json.loads(out.read_text()), [[WANT, GIVE], [GIVE]]
    assert records == [
        {"instance_id": str(number), "summary": reference,
         "summary_trees": [f"# ::snt  {s} \n{PARSED[s]}" for s in line],  # <t>'s spaces kept
         "tree": [t for s in line for t in sentence_subgraphs(GRAPHS[s])]}
        for number, (reference, line) in enumerate(zip(REFERENCES, sentences))]
    assert records[0]["tree"][:2] == [
        "(w / want-01\n   :ARG0 (b / boy)\n   :ARG1 (s / see-01\n            :ARG0 b\n"
        "            :ARG1 (g / girl)))",
        "(s / see-01\n   :ARG0 (b / boy)\n   :ARG1 (g / girl))"]  # b instantiated from the graph
    assert printed == "smus: 6 subgraphs for 2 references (their text needs --amr-generator)\n"


def test_a_sentence_amrlib_cannot_parse_names_its_line_and_number(strict_parser, tmp_path,
                                                                   capsys):
    references, out = tmp_path / "references.txt", tmp_path / "trees.json"
    references.write_text(f"{REFERENCES[0]}\n<t> {GIVE} </t> <t> {UNPARSABLE} </t>\n")
    code, printed, err = sumbench(capsys, "units", "smus", "--amr-parser", strict_parser,
                                  "--references", references, "--trees-out", out)
    assert (code, printed) == (2, "")  # stderr: transformers' weight-loading bar, then the error
    assert err.splitlines()[-1] == \
        f"sumbench units: error: {references}:2: amrlib could not parse sentence 2"
    assert not out.exists()
