import os

# Tests never touch the network: everything loads from local folders.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import logging  # noqa: E402
import warnings  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402

# Test models are tiny: one thread is fastest, and on a busy 2-core machine two OpenMP threads
# spin-wait for each other on every small op.
torch.set_num_threads(1)


class _DeprecationRecorder(logging.Handler):
    """Collects what transformers *logs* about deprecated names (``logger.warning_once``, e.g. an old
    ``past_key_values`` argument): those never reach the ``warnings`` filters of pyproject.toml."""

    def __init__(self) -> None:
        super().__init__(level=logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if "deprecat" in message.lower():
            self.messages.append(f"{record.name}: {message}")


@pytest.fixture(autouse=True)
def no_deprecated_transformers_api(request):
    """Fail a test whose code path makes transformers log or warn that something is deprecated.

    transformers logs each such message once per process, so the first test on the path fails; warnings
    raised by transformers itself (not only those from hf_nlm, which pyproject.toml turns into errors) are
    recorded too. A test that checks the deprecated spelling on purpose is marked ``allow_deprecated``."""
    if request.node.get_closest_marker("allow_deprecated"):
        yield
        return
    recorder = _DeprecationRecorder()
    logger = logging.getLogger("transformers")
    logger.addHandler(recorder)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")
        warnings.filterwarnings("error", category=DeprecationWarning, module="hf_nlm")
        warnings.filterwarnings("error", category=FutureWarning, module="hf_nlm")
        try:
            yield
        finally:
            logger.removeHandler(recorder)
    deprecated = [
        w for w in caught
        if issubclass(w.category, (DeprecationWarning, FutureWarning)) and "transformers" in w.filename
    ]
    for w in caught:  # every other warning goes on to pytest's own summary
        if w not in deprecated:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno, source=w.source)
    found = recorder.messages + [f"{w.category.__name__} from {w.filename}:{w.lineno}: {w.message}"
                                 for w in deprecated]
    if found:
        pytest.fail("deprecated transformers API on this test's path:\n  " + "\n  ".join(found),
                    pytrace=False)


@pytest.fixture
def toy_texts() -> list[str]:
    return [
        "the cat sat on the mat",
        "the dog sat on the log",
        "a cat saw a dog",
        "the dog saw the cat on the mat",
    ]


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory):
    """A training run folder written by `hf-nlm train` on small local text files (2 updates, NPLM).
    Shared: copy it before changing it."""
    from hf_nlm_cli import main

    root = tmp_path_factory.mktemp("tiny-run")
    text = "the cat sat on the mat\nthe dog sat on the log\na cat saw a dog\n" * 4
    for split in ("train", "valid", "test"):
        (root / f"{split}.txt").write_text(text, encoding="utf-8")
    out = root / "run"
    assert main(["train", "--train-file", str(root / "train.txt"),
                 "--validation-file", str(root / "valid.txt"), "--test-file", str(root / "test.txt"),
                 "--output-dir", str(out), "--context-size", "2", "--embedding-size", "8",
                 "--hidden-size", "8", "--num-epochs", "1", "--max-steps", "2", "--batch-size", "2",
                 "--block-size", "8", "--logging-steps", "1", "--no-progress-bar"]) == 0
    return out
