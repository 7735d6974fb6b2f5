import pytest

from tasks.plumbing.errors import UnknownNameError
from tasks.plumbing.registry import DuplicateNameError, Registry


def make_registry():
    registry = Registry("task")
    registry.register("abstractive_summarization", object(), aliases=("ABS",))
    registry.register("extractive_summarization", object(), aliases=("EXT",))
    return registry


def test_lookup_by_name_and_case_insensitive_alias():
    registry = make_registry()
    assert registry.canonical_name("abs") == "abstractive_summarization"
    assert registry.canonical_name("EXT") == "extractive_summarization"
    assert registry.get("ABS") is registry.get("abstractive_summarization")
    assert registry.aliases_of("extractive_summarization") == ["ext"]


def test_duplicate_names_and_aliases_are_rejected():
    registry = make_registry()
    with pytest.raises(DuplicateNameError, match="already registered"):
        registry.register("abstractive_summarization", object())
    with pytest.raises(DuplicateNameError, match="'ABS'"):
        registry.register("other_task", object(), aliases=("ABS",))
    assert "other_task" not in registry


def test_unknown_name_suggests_close_match():
    registry = make_registry()
    with pytest.raises(UnknownNameError) as info:
        registry.get("abstractive_sumarization")
    assert "did you mean 'abstractive_summarization'" in str(info.value)
