"""Every parameter takes part in every training loss, whatever the batch holds.

A head's branch that runs only on the targets that need it (the numeracy LM's numeral branch on numeral
targets, its word branch on word targets) would leave its parameters out of a batch without such targets.
transformers' common tests check that every parameter has a gradient after a backward
(``test_training_gradient_checkpointing``), and DDP stops a multi-process run at the first step where one
process's loss did not use a parameter. Both are checked here, for every registered model type x head."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch
from test_model_contract import NUMERAL_VOCAB, V, registry_cases, tiny

CASES = registry_cases()
NUMERALS = sorted(NUMERAL_VOCAB.values())
WORDS = [i for i in range(V) if i not in NUMERALS]


def batch(ids: list[int]) -> torch.Tensor:
    return torch.tensor([ids[:6], ids[-6:]])


def loss_of(model, ids: torch.Tensor, encoder_decoder: bool = False) -> torch.Tensor:
    inputs = {"input_ids": ids, "labels": ids}
    if encoder_decoder:
        inputs["decoder_input_ids"] = ids
    return model(**inputs).loss


@pytest.mark.parametrize("name,head", CASES, ids=[f"{n}-{h}" for n, h in CASES])
@pytest.mark.parametrize("targets", ["words", "numerals"])
def test_every_parameter_has_a_gradient(name, head, targets):
    model = tiny(name, head).train()
    ids = batch(WORDS[1:] if targets == "words" else NUMERALS * 3)
    loss_of(model, ids, model.config.is_encoder_decoder).backward()
    missing = [n for n, p in model.named_parameters() if p.requires_grad and p.grad is None]
    assert missing == []


DDP_SCRIPT = textwrap.dedent(
    """
    import json, sys
    import torch, torch.distributed as dist
    sys.path.insert(0, sys.argv[1])
    from test_every_parameter_in_loss import NUMERALS, WORDS, batch, loss_of
    from test_model_contract import tiny

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    grads = {}
    for head in ("hsoftmax", "drnn", "mog", "combination", "dexp"):
        model = tiny("numeracy_lm", head).eval()  # no dropout: the same function in both runs
        ddp = torch.nn.parallel.DistributedDataParallel(model)
        # Rank 1's batch has no numeral: its loss never reaches the numeral branch.
        ids = batch(WORDS[1:] if rank == 1 else WORDS[:4] + NUMERALS + WORDS[4:])
        for _ in range(2):  # DDP notices an unused parameter at the step after it
            model.zero_grad()
            loss_of(ddp, ids).backward()
        grads[head] = {n: p.grad.tolist() for n, p in model.named_parameters()}
    if rank == 0:
        json.dump(grads, open(sys.argv[2], "w"))
    """
)


def test_ddp_trains_the_numeracy_lm_when_one_process_sees_no_numeral(tmp_path):
    """2 CPU processes (gloo), one without a numeral target: DDP's averaged gradient equals the mean of the
    two losses' gradients computed in one process."""
    (tmp_path / "script.py").write_text(DDP_SCRIPT)
    out = tmp_path / "grads.json"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env.pop("WORLD_SIZE", None)
    proc = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
         str(tmp_path / "script.py"), os.path.dirname(__file__), str(out)],
        capture_output=True, text=True, timeout=180, env=env,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    ddp = json.loads(out.read_text())
    for head, grads in ddp.items():
        model = tiny("numeracy_lm", head).eval()
        loss = sum(loss_of(model, batch(ids)) for ids in (WORDS[:4] + NUMERALS + WORDS[4:], WORDS[1:])) / 2
        loss.backward()
        for n, p in model.named_parameters():
            torch.testing.assert_close(torch.tensor(grads[n]), p.grad, rtol=1e-5, atol=1e-6,
                                       msg=f"{head} {n}")
