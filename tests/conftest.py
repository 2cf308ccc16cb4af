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
