import os

# Tests never touch the network: everything loads from local folders.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import pytest  # noqa: E402
import torch  # noqa: E402

# Test models are tiny: one thread is fastest, and on a busy 2-core machine two OpenMP threads
# spin-wait for each other on every small op.
torch.set_num_threads(1)


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
    from hf_nlm.cli import main

    root = tmp_path_factory.mktemp("tiny-run")
    text = "the cat sat on the mat\nthe dog sat on the log\na cat saw a dog\n" * 4
    for split in ("train", "valid", "test"):
        (root / f"{split}.txt").write_text(text, encoding="utf-8")
    out = root / "run"
    assert main(["train", "--train-file", str(root / "train.txt"), "--validation-file", str(root / "valid.txt"),
                 "--test-file", str(root / "test.txt"), "--output-dir", str(out), "--context-size", "2",
                 "--embedding-size", "8", "--hidden-size", "8", "--num-epochs", "1", "--max-steps", "2",
                 "--batch-size", "2", "--block-size", "8", "--logging-steps", "1", "--no-progress-bar"]) == 0
    return out
