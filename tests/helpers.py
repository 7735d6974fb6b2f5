"""Plain helpers several test modules share (fixtures live in conftest.py)."""
from __future__ import annotations

from pathlib import Path


def files_under(folder: Path) -> dict[str, bytes]:
    """{relative POSIX path: bytes} of every file below `folder`."""
    return {p.relative_to(folder).as_posix(): p.read_bytes()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def sumbench(capsys, *args) -> tuple[int, str, str]:
    """Run `sumbench ARGS...` in-process: (exit code, stdout, stderr) of this call alone."""
    from benchmark.cli import main

    capsys.readouterr()
    code = main([str(arg) for arg in args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def model_weights(folder: Path) -> dict:
    """{name: tensor} of a saved model folder (model.safetensors)."""
    from safetensors.torch import load_file

    return load_file(str(folder / "model.safetensors"))


def assert_same_weights(first: dict, second: dict) -> None:
    """The same tensor names, and every tensor equal bit for bit."""
    import torch

    assert first.keys() == second.keys()
    different = [name for name in first if not torch.equal(first[name], second[name])]
    assert not different, f"weights differ: {different[:5]}"


#: AllenNLP-style SRL frames of three sentences (words and BIO tags per verb), as `sumbench
#: stus --frames` reads them
SRL_FRAMES = {
    "Mr. Lee founded Acme in 1990.": {
        "words": ["Mr.", "Lee", "founded", "Acme", "in", "1990", "."],
        "verbs": [{"tags": ["B-ARG0", "I-ARG0", "B-V", "B-ARG1", "B-ARGM-TMP", "I-ARGM-TMP",
                            "O"]}]},
    "It grew fast.": {"words": ["It", "grew", "fast", "."],
                      "verbs": [{"tags": ["B-ARG1", "B-V", "B-ARGM-MNR", "O"]}]},
    "Sales rose.": {"words": ["Sales", "rose", "."], "verbs": [{"tags": ["B-ARG1", "B-V", "O"]}]},
}


def screenshot_path(tmp_path: Path, name: str) -> Path:
    """Where a browser test saves its screenshot `name`: under $SUMBENCH_SCREENSHOTS when set
    (the docs' images: `SUMBENCH_SCREENSHOTS=docs/img pytest -k browser_or_viewer`), else in
    the test's own folder."""
    import os

    folder = Path(os.environ.get("SUMBENCH_SCREENSHOTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    return folder / name


#: Debian's Chromium, which the browser tests drive through Playwright
CHROMIUM = Path("/usr/bin/chromium")


def launch_chromium(playwright):
    """Headless Chromium for a test (the caller closes it): no sandbox (tests run as root), no
    GPU, no background traffic."""
    return playwright.chromium.launch(
        executable_path=str(CHROMIUM),
        args=["--no-sandbox", "--disable-gpu", "--disable-background-networking",
              "--disable-component-update", "--disable-sync", "--no-first-run"])
