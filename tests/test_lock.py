"""constraints.txt is the lock of the tested set: every package `pip install -e ".[test]"`
resolves is pinned there, and an environment installed with it holds exactly those versions.
`.ci/lock.py` writes it from a fresh resolve (docs/testing.md)."""
from __future__ import annotations

import os
import re
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from helpers import load_script

REPO = Path(__file__).resolve().parent.parent
LOCK = REPO / "constraints.txt"
REFRESH = "refresh the lock with `python3 .ci/lock.py` (docs/testing.md)"
REINSTALL = 'install with `pip install -c constraints.txt -e ".[test]"`'


def _lock_script():
    return load_script(REPO / ".ci" / "lock.py", "ci_lock")


def locked() -> dict[str, str]:
    """{canonical name: version} of constraints.txt; every line not a comment is NAME==VERSION."""
    pins = {}
    for number, line in enumerate(LOCK.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        found = re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s#;+]+)", line.strip())
        assert found, f"constraints.txt:{number}: not NAME==VERSION: {line!r}"
        name = canonicalize_name(found.group(1))
        assert name not in pins, f"constraints.txt:{number}: {name} pinned twice"
        pins[name] = found.group(2)
    return pins


def public(version: str) -> str:
    """A version without its local label: torch's 2.13.0+cpu is the lock's 2.13.0."""
    return Version(version).public


def installed(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def resolved_closure(root: str = "sumbench", extras: tuple[str, ...] = ("test",)) -> set[str]:
    """The canonical names of every installed package ROOT[EXTRAS] needs, transitively, as the
    installed packages' own metadata declares them for this interpreter and platform."""
    walked: set[tuple[str, tuple[str, ...]]] = set()
    pending = [(root, extras)]
    while pending:
        name, wanted = pending.pop()
        if (canonicalize_name(name), wanted) in walked:
            continue
        walked.add((canonicalize_name(name), wanted))
        for text in metadata.requires(name) or []:
            requirement = Requirement(text)
            marker = requirement.marker
            if marker and not any(marker.evaluate({"extra": extra}) for extra in wanted or ("",)):
                continue
            if installed(requirement.name) is not None:
                pending.append((requirement.name, tuple(sorted(requirement.extras))))
    return {name for name, _ in walked} - {canonicalize_name(root)}


def test_the_lock_is_sorted_and_pins_what_the_issue_names():
    pins = locked()
    assert list(pins) == sorted(pins), "constraints.txt: names out of order; " + REFRESH
    for name in ("torch", "transformers", "peft", "datasets", "tokenizers", "safetensors",
                 "huggingface-hub", "accelerate", "numpy", "scipy", "scikit-learn", "pytest",
                 "setuptools"):
        assert name in pins, f"constraints.txt does not pin {name}"
    assert "pip" not in pins and "sumbench" not in pins


def test_pyproject_s_ranges_admit_every_locked_version():
    """The ranges users install with and the lock agree: a locked version outside its range
    means one of them is stale."""
    import tomllib

    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    pins = locked()
    wanted = [*project["dependencies"], *project["optional-dependencies"]["test"]]
    outside = [f"{text}: locked {pins[canonicalize_name(Requirement(text).name)]}"
               for text in wanted
               if not Requirement(text).specifier.contains(
                   pins[canonicalize_name(Requirement(text).name)], prereleases=True)]
    assert not outside, "\n".join(outside)


def test_every_package_the_test_extra_resolves_is_locked_at_its_installed_version():
    if installed("sumbench") is None:
        pytest.skip("sumbench is not installed (pip install -e .): no metadata to resolve")
    pins = locked()
    closure = resolved_closure()
    assert {"transformers", "torch", "pytest", "lm-eval"} <= closure  # the walk went deep
    missing = sorted(closure - set(pins))
    assert not missing, f"installed but not locked: {', '.join(missing)}; " + REFRESH
    differ = [f"{name} {installed(name)} (locked {pins[name]})" for name in sorted(closure)
              if public(installed(name)) != pins[name]]
    assert not differ, "not the locked versions: " + ", ".join(differ) + "; " + REINSTALL


def test_ci_s_environment_holds_the_locked_set_and_nothing_else():
    """What `pip freeze --all` shows in CI's venv, pip and sumbench aside, is the lock."""
    if not os.environ.get("CI") and not os.environ.get("SUMBENCH_REQUIRE_LOCK"):
        pytest.skip("only in CI's fresh venv (CI or SUMBENCH_REQUIRE_LOCK set): a developer's "
                    "environment may hold tools of their own")
    pins = locked()
    everything = {canonicalize_name(dist.metadata["Name"]): dist.version
                  for dist in metadata.distributions()}
    extra = sorted(set(everything) - set(pins) - {"pip", "sumbench"})
    assert not extra, f"installed but not locked: {', '.join(extra)}; " + REFRESH
    differ = [f"{name} {version} (locked {pins[name]})" for name, version in everything.items()
              if name in pins and public(version) != pins[name]]
    assert not differ, "not the locked versions: " + ", ".join(differ)


@pytest.mark.parametrize("freeze, lines", [
    (["torch==2.13.0+cpu", "Jinja2==3.1.6", "pip==23.2.1"], ["jinja2==3.1.6", "torch==2.13.0"]),
    (["typing_extensions==4.15.0", "PyYAML==6.0.3"], ["pyyaml==6.0.3",
                                                      "typing-extensions==4.15.0"]),
    (["sumbench==0.1.0", "ruff==0.6.0"], ["ruff==0.6.0"]),
])
def test_the_lock_script_pins_each_frozen_package_by_its_canonical_name(freeze, lines):
    assert _lock_script().lock_lines(freeze) == lines


@pytest.mark.parametrize("line", ["-e git+https://x/y.git#egg=y", "foo @ file:///tmp/foo.whl",
                                  "bar>=1.0"])
def test_the_lock_script_refuses_a_line_it_cannot_pin(line):
    with pytest.raises(SystemExit, match="cannot lock the line"):
        _lock_script().lock_lines(["numpy==2.0.0", line])
