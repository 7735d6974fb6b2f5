"""`sumbench data build` / `sumbench data fetch` through benchmark.cli.main."""
from __future__ import annotations

import json

import pytest

from benchmark.cli import main

from helpers import files_under


def test_build_writes_the_official_files_and_prints_counts(usb_fixture_dir, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["data", "build", "--raw", str(usb_fixture_dir / "raw"), "--out", str(out)]) == 0
    produced = files_under(out)
    assert "build_info.json" in produced
    del produced["build_info.json"]
    assert produced == files_under(usb_fixture_dir / "task_datasets")
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].split() == ["variant/task", "train", "validation", "test"]
    assert "all/factuality_classification 14 18 14".split() in [row.split() for row in printed]
    assert len(printed) == 1 + 4 * 8


def test_build_selected_variants_only(usb_fixture_dir, tmp_path, capsys):
    out = tmp_path / "out"
    argv = ["data", "build", "--raw", str(usb_fixture_dir / "raw"), "--out", str(out),
            "--variants", "companies", "biographies"]
    assert main(argv) == 0
    assert sorted(p.name for p in out.iterdir()) == ["biographies", "build_info.json",
                                                     "companies"]
    info = json.loads((out / "build_info.json").read_text())
    assert info["variants"] == ["companies", "biographies"]
    assert info["records"]["companies"]["topicbased_summarization"]["test"] == 0


def test_broken_annotation_exits_2_naming_file_and_field(raw_copy, tmp_path, capsys):
    path = raw_copy / "annotations/biographies/doc7_1.json"
    document = json.loads(path.read_text())
    document["annotations"]["annotations"]["refs"][0].append(99)
    path.write_text(json.dumps(document))
    out = tmp_path / "out"
    assert main(["data", "build", "--raw", str(raw_copy), "--out", str(out)]) == 2
    error = capsys.readouterr().err
    assert f"{path}, field 'annotations.annotations.refs[0][" in error
    assert "out of range" in error and "Traceback" not in error
    assert not out.exists()


def test_broken_split_file_exits_2_naming_file_and_line(raw_copy, tmp_path, capsys):
    split_file = raw_copy / "splits/all/test.txt"
    split_file.write_text(split_file.read_text() + "schools/doc1.json\n")
    out = tmp_path / "out"
    assert main(["data", "build", "--raw", str(raw_copy), "--out", str(out)]) == 2
    assert f"{split_file}:4: listed annotation file not found" in capsys.readouterr().err
    assert not out.exists()


def test_unknown_variant_exits_2(usb_fixture_dir, tmp_path, capsys):
    argv = ["data", "build", "--raw", str(usb_fixture_dir / "raw"), "--out",
            str(tmp_path / "out"), "--variants", "landmarks"]
    assert main(argv) == 2
    assert "splits/landmarks: variant folder not found" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_fetch_offline_exits_2_with_instructions(tmp_path, capsys):
    constants = pytest.importorskip("huggingface_hub.constants")
    if not constants.HF_HUB_OFFLINE:
        pytest.skip("HF_HUB_OFFLINE is not set; this test must not touch the network")
    assert main(["data", "fetch", "--cache-dir", str(tmp_path / "cache")]) == 2
    error = capsys.readouterr().err
    assert "sumbench data: error: USB task data is not available" in error
    assert "--data DIR" in error and not (tmp_path / "cache" / "main").exists()


def test_fetch_refresh_says_when_the_archive_changed(usb_fixture_dir, tmp_path, capsys,
                                                     monkeypatch):
    """The hub client replaced by one that hands back local archives (first one, then
    another)."""
    import hashlib
    import tarfile

    import huggingface_hub

    archives = []
    for name, variants in (("a", ("all", "companies")), ("b", ("all",))):
        path = tmp_path / f"{name}.tar.gz"
        with tarfile.open(path, "w:gz") as tar:
            for variant in variants:
                tar.add(usb_fixture_dir / "task_datasets" / variant, arcname=variant)
        archives.append(path)
    sha = [hashlib.sha256(path.read_bytes()).hexdigest() for path in archives]
    served = [archives[0]]
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", lambda **_: str(served[0]))
    argv = ["data", "fetch", "--cache-dir", str(tmp_path / "cache")]
    assert main(argv) == 0
    out, err = capsys.readouterr()
    assert out.strip() == str(tmp_path / "cache" / "main" / "extracted")
    assert f"downloaded and extracted the archive (sha256 {sha[0]})" in err
    served[0] = archives[1]
    assert main(argv) == 0 and "using the cached archive" in capsys.readouterr().err
    assert main([*argv, "--refresh"]) == 0
    assert (f"sumbench data fetch: the archive changed (sha256 {sha[0]} -> {sha[1]}); "
            f"extracted it again") in capsys.readouterr().err
    assert not (tmp_path / "cache" / "main" / "extracted" / "companies").exists()
    assert main([*argv, "--force"]) == 0
    assert "the archive is unchanged" in capsys.readouterr().err
