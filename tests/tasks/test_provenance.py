"""tasks.plumbing.provenance: the git state of a real temporary repository, and the record."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tasks.plumbing.provenance import cpu_model, git_commit, package_versions, provenance

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "-c", "user.name=Test",
                           "-c", "user.email=test@example.org", "-c", "commit.gpgsign=false",
                           *args], capture_output=True, text=True, check=True).stdout.strip()


@pytest.fixture()
def repo(tmp_path) -> Path:
    folder = tmp_path / "repo"
    folder.mkdir()
    git(folder, "init", "-q")
    (folder / "module.py").write_text("VALUE = 1\n")
    (folder / ".gitignore").write_text("*.log\n__pycache__/\n")
    git(folder, "add", "module.py", ".gitignore")
    git(folder, "commit", "-q", "-m", "first")
    return folder


def test_a_clean_checkout_is_not_dirty(repo):
    assert git_commit(repo) == {"commit": git(repo, "rev-parse", "HEAD"), "dirty": False}


def test_ignored_files_do_not_make_it_dirty(repo):
    (repo / "run.log").write_text("noise\n")
    (repo / "__pycache__").mkdir()
    (repo / "__pycache__" / "module.cpython.pyc").write_bytes(b"\0")
    assert git_commit(repo)["dirty"] is False


def test_an_untracked_new_module_makes_it_dirty(repo):
    (repo / "new_module.py").write_text("VALUE = 2\n")
    assert git_commit(repo)["dirty"] is True


def test_a_changed_tracked_file_makes_it_dirty(repo):
    (repo / "module.py").write_text("VALUE = 3\n")
    assert git_commit(repo)["dirty"] is True


def test_outside_a_repository_nothing_is_claimed(tmp_path):
    assert git_commit(tmp_path) == {"commit": None, "dirty": None}


def test_a_copy_inside_another_projects_repository_claims_nothing(repo):
    """sumbench installed (not editable) in a virtual environment inside a user's project:
    the folder is in a repository, but is not its top, so that commit is not ours."""
    (repo / ".gitignore").write_text("*.log\n__pycache__/\nvenv/\n")
    git(repo, "commit", "-q", "-am", "ignore the environment")
    site = repo / "venv" / "lib" / "site-packages"
    site.mkdir(parents=True)
    assert git_commit(site) == {"commit": None, "dirty": None}
    assert git_commit(repo)["commit"] == git(repo, "rev-parse", "HEAD")


def test_thread_settings_are_recorded(monkeypatch):
    import os

    import torch

    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    threads = provenance()["threads"]
    assert threads["torch_threads"] == torch.get_num_threads()
    assert threads["OMP_NUM_THREADS"] == "1" and threads["cpus"] == len(os.sched_getaffinity(0))


def test_the_record_holds_command_config_seeds_and_versions():
    record = provenance({"a": 1}, {"seed": 3})
    assert record["config"] == {"a": 1} and record["seeds"] == {"seed": 3}
    assert record["command"][1:] == sys.argv[1:]
    assert record["packages"]["numpy"] == package_versions(("numpy",))["numpy"] is not None
    assert set(record["git"]) == {"commit", "dirty"}
    assert record["cpu"] == cpu_model() and record["cpu"].strip() == record["cpu"] != ""
    if Path("/proc/cpuinfo").is_file():  # Linux: the "model name" line, as written there
        names = [line.split(":", 1)[1].strip() for line in
                 Path("/proc/cpuinfo").read_text().splitlines()
                 if line.lower().startswith("model name")]
        assert not names or record["cpu"] == names[0]


def test_torch_runtime_names_the_build_and_only_gpus_this_process_used(monkeypatch):
    """The build's own version (with +cpu / +cu130), the CUDA it was built for, and GPUs only
    where this process put memory; nothing at all when torch was never imported."""
    import torch

    runtime = provenance()["torch_runtime"]
    assert runtime["build"] == torch.__version__ and runtime["cuda"] == torch.version.cuda
    if torch.cuda.is_initialized():  # the GPUs this process put memory on, and no other
        assert runtime["gpus"] == [torch.cuda.get_device_name(index)
                                   for index in range(torch.cuda.device_count())
                                   if torch.cuda.max_memory_reserved(index) > 0]
    else:
        assert runtime["gpus"] == [] and runtime["cudnn"] is None
    monkeypatch.delitem(sys.modules, "torch")
    assert provenance()["torch_runtime"] is None


def test_without_a_path_it_is_the_commit_of_the_checkout_sumbench_runs_from():
    """The default root is the repository's top, wherever provenance.py sits in the tree."""
    root = Path(__file__).resolve().parents[2]
    if not (root / ".git").exists():
        pytest.skip("the tests do not run from a git checkout")
    assert git_commit()["commit"] == git(root, "rev-parse", "HEAD")
