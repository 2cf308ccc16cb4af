"""LBL (Mnih & Hinton 2007) and HLBL (Mnih & Hinton 2008) against independent re-computations of
their equations; the head option shared by NPLM, LBL and HLBL."""

import itertools
import json
import math

import pytest
import torch
from plain_search import plain_search
from transformers import AutoConfig, AutoModelForCausalLM, GenerationConfig

import hf_nlm
from hf_nlm import HLBLConfig, HLBLForCausalLM, LBLConfig, LBLForCausalLM, NPLMConfig, NPLMForCausalLM
from hf_nlm.heads import SplitSoftmaxHead, TreeSoftmaxHead, tree_config_fields
from hf_nlm.trees import WordTree, balanced_tree, random_tree

V = 7


def multi_code_tree() -> WordTree:
    """A tree over 7 words in which word 0 has two codes and word 3 has two codes."""
    children = [
        [1, 2],  # root
        [3, 4],
        [5, -4],  # (node 2, bit 1) -> word 3
        [-1, -2],  # words 0, 1
        [-3, -5],  # words 2, 4
        [6, -6],  # word 5
        [-7, -1],  # words 6, 0 (second code of word 0)
    ]
    # Give word 3 a second leaf too: replace word 5's leaf by a node over (5, 3).
    children[5] = [6, 7]
    children.append([-6, -4])
    return WordTree(children, V)


def tiny_lbl(diagonal: bool = False, **kw) -> LBLForCausalLM:
    torch.manual_seed(0)
    cfg = dict(vocab_size=V, context_size=3, hidden_size=4, diagonal_context=diagonal, initializer_range=0.5)
    cfg.update(kw)
    model = plain_search(LBLForCausalLM(LBLConfig(**cfg)).eval())
    with torch.no_grad():
        if model.lm_head.bias is not None:
            model.lm_head.bias.uniform_(-1, 1)  # non-zero b_w so the test sees it
    return model


def tiny_hlbl(tree: WordTree | None = None, **kw) -> HLBLForCausalLM:
    torch.manual_seed(0)
    cfg = dict(vocab_size=V, context_size=3, hidden_size=4, initializer_range=0.5)
    cfg.update(kw)
    model = plain_search(
        HLBLForCausalLM(HLBLConfig(**cfg), tree=tree if tree is not None else multi_code_tree()).eval())
    with torch.no_grad():
        model.lm_head.bias.uniform_(-1, 1)
    return model


def r_hat_by_hand(model, context: list[int]) -> torch.Tensor:
    """r_hat = sum_{i=1}^{n-1} C_i r_{w_{t-i}} for one context given oldest first (Mnih & Hinton eq. 1)."""
    R, C = model.model.R.weight, model.model.C
    r_hat = torch.zeros(model.config.hidden_size)
    for i in range(1, model.config.context_size + 1):
        r = R[context[-i]]  # w_{t-i}
        r_hat = r_hat + (C[i - 1] * r if model.config.diagonal_context else C[i - 1] @ r)
    return r_hat


def contexts_of(model, ids: torch.Tensor):
    """(b, t, context oldest first) for every position, with bos before the start."""
    bos, n_1 = model.config.bos_token_id, model.config.context_size
    for b in range(ids.shape[0]):
        padded = [bos] * (n_1 - 1) + ids[b].tolist()
        for t in range(ids.shape[1]):
            yield b, t, padded[t : t + n_1]


IDS = torch.tensor([[3, 0, 6, 2, 5, 4, 1], [2, 2, 4, 6, 0, 3, 5]])


# ----------------------------------------------------------------------------- LBL


@pytest.mark.parametrize("diagonal", [False, True])
def test_lbl_forward_equals_paper_formula(diagonal):
    model = tiny_lbl(diagonal)
    R, b = model.model.R.weight, model.lm_head.bias
    with torch.no_grad():
        logits = model(IDS).logits
        for bi, t, context in contexts_of(model, IDS):
            # P(w) proportional to exp(r_hat . r_w + b_w), with the SAME table R as the context words.
            expected = R @ r_hat_by_hand(model, context) + b
            torch.testing.assert_close(logits[bi, t], expected, rtol=1e-5, atol=1e-5)


def test_lbl_parameter_shapes_and_count():
    n_1, D = 3, 4
    full = LBLForCausalLM(LBLConfig(vocab_size=V, context_size=n_1, hidden_size=D))
    diag = LBLForCausalLM(LBLConfig(vocab_size=V, context_size=n_1, hidden_size=D, diagonal_context=True))
    assert full.model.C.shape == (n_1, D, D) and diag.model.C.shape == (n_1, D)
    # R (tied to the output), C, b.
    assert full.num_parameters() == V * D + n_1 * D * D + V
    assert diag.num_parameters() == V * D + n_1 * D + V


def test_lbl_input_and_output_vectors_are_one_table():
    model = tiny_lbl()
    assert model.lm_head.weight is model.model.R.weight
    model.train()
    model(IDS, labels=IDS).loss.backward()
    names = [n for n, _ in model.named_parameters()]
    assert "lm_head.weight" not in names  # one parameter, one gradient (input + output contributions)
    for name, p in model.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, name


def test_lbl_save_load_keeps_tied_weights(tmp_path):
    model = tiny_lbl()
    model.save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["model_type"] == "lbl" and config["tie_word_embeddings"] is True
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path)
    assert isinstance(loaded, LBLForCausalLM)
    assert loaded.lm_head.weight.data_ptr() == loaded.model.R.weight.data_ptr()
    assert loaded.lm_head.weight.data_ptr() == loaded.get_input_embeddings().weight.data_ptr()
    with torch.no_grad():
        assert torch.equal(model(IDS).logits, loaded(IDS).logits)


def test_lbl_untied_has_its_own_output_table(tmp_path):
    model = tiny_lbl(tie_word_embeddings=False)
    assert model.lm_head.weight is not model.model.R.weight
    model.save_pretrained(tmp_path)
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path)
    assert loaded.lm_head.weight.data_ptr() != loaded.model.R.weight.data_ptr()
    with torch.no_grad():
        assert torch.equal(model(IDS).logits, loaded(IDS).logits)


def test_lbl_split_head_is_tied_and_survives_save_load(tmp_path):
    model = tiny_lbl(head="split", cutoffs=[2, 5])
    assert isinstance(model.lm_head, SplitSoftmaxHead) and model.lm_head.weight is model.model.R.weight
    model.save_pretrained(tmp_path)
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path)
    assert loaded.lm_head.weight.data_ptr() == loaded.model.R.weight.data_ptr()
    with torch.no_grad():
        assert torch.equal(model(IDS).logits, loaded(IDS).logits)


# ----------------------------------------------------------------------------- HLBL


def tree_log_prob_by_hand(model: HLBLForCausalLM, r_hat: torch.Tensor, word: int) -> float:
    """log sum_{d in D(w)} prod_i sigmoid(+-(r_hat . q_i + b_i)) (Mnih & Hinton 2008, eq. 3-4)."""
    q, b = model.lm_head.weight, model.lm_head.bias
    total = 0.0
    for code in model.tree().codes(word):
        p = 1.0
        for node, bit in code:
            s = torch.sigmoid(r_hat @ q[node] + b[node]).item()
            p *= s if bit == 1 else 1.0 - s
        total += p
    return math.log(total)


@pytest.mark.parametrize("diagonal", [False, True])
def test_hlbl_log_probs_equal_tree_formula_and_sum_to_one(diagonal):
    model = tiny_hlbl(diagonal_context=diagonal)
    assert model.tree().max_codes == 2  # words with several codes are summed over
    with torch.no_grad():
        logits = model(IDS).logits
        torch.testing.assert_close(logits.exp().sum(-1), torch.ones(IDS.shape), rtol=1e-6, atol=1e-6)
        for bi, t, context in contexts_of(model, IDS):
            r_hat = r_hat_by_hand(model, context)
            expected = torch.tensor([tree_log_prob_by_hand(model, r_hat, w) for w in range(V)])
            torch.testing.assert_close(logits[bi, t], expected.to(logits.dtype), rtol=1e-5, atol=1e-5)
        # generate() applies log_softmax: it leaves normalised log-probabilities unchanged.
        torch.testing.assert_close(torch.log_softmax(logits, -1), logits, rtol=1e-6, atol=1e-6)


def test_hlbl_save_load_keeps_the_tree(tmp_path):
    model = tiny_hlbl()
    model.save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["model_type"] == "hlbl" and config["head"] == "tree"
    assert {k: config[k] for k in tree_config_fields(model.tree())} == tree_config_fields(model.tree())
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path)
    assert isinstance(loaded, HLBLForCausalLM)
    assert loaded.tree() == model.tree()
    with torch.no_grad():
        assert torch.equal(model(IDS).logits, loaded(IDS).logits)


def test_set_tree_replaces_the_tree_and_config(tmp_path):
    model = tiny_hlbl(tree=random_tree(V, seed=3))
    R_before = model.model.R.weight.detach().clone()
    new = multi_code_tree()
    model.set_tree(new)
    assert model.tree() == new.renumbered_breadth_first()
    assert model.config.tree_max_codes == 2 and model.config.tree_num_nodes == new.num_nodes
    assert torch.equal(model.model.R.weight, R_before)  # the body is kept
    model.save_pretrained(tmp_path)
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path)
    assert loaded.tree() == model.tree()
    with torch.no_grad():
        assert torch.equal(model(IDS).logits, loaded(IDS).logits)


def test_hlbl_predicted_word_vectors_average_r_hat():
    model = tiny_hlbl()
    ids = torch.tensor([[3, 0, 6, 0, 5]])
    vectors = model.predicted_word_vectors(ids)
    assert vectors.shape == (V, 4)
    with torch.no_grad():
        r_hat = model.model(ids).last_hidden_state[0]
    # Word 0 follows positions 0 and 2.
    torch.testing.assert_close(vectors[0].float(), (r_hat[0] + r_hat[2]) / 2)


# ----------------------------------------------------------------------------- every body x every head


def build(body: str, head: str):
    torch.manual_seed(0)
    head_kw = {"softmax": {}, "split": {"cutoffs": [2, 5]}, "tree": {}}[head]
    tree = multi_code_tree() if head == "tree" else None
    if body == "nplm":
        config = NPLMConfig(vocab_size=V, context_size=3, embedding_size=4, hidden_size=5,
                            initializer_range=0.5, head=head, **head_kw)
        return NPLMForCausalLM(config, tree=tree)
    if body == "hlbl":
        return HLBLForCausalLM(HLBLConfig(vocab_size=V, context_size=3, hidden_size=4, initializer_range=0.5),
                               tree=tree)
    config = LBLConfig(vocab_size=V, context_size=3, hidden_size=4, initializer_range=0.5, head=head,
                       tie_word_embeddings=head != "tree", **head_kw)
    return LBLForCausalLM(config, tree=tree)


BODY_HEADS = ([("nplm", h) for h in ("softmax", "split", "tree")]
              + [("lbl", h) for h in ("softmax", "split", "tree")])


@pytest.mark.parametrize("body, head", BODY_HEADS + [("hlbl", "tree")])
def test_training_loss_is_minus_log_of_the_full_distribution(body, head):
    model = build(body, head)
    labels = IDS.clone()
    labels[0, :2] = -100
    model.eval()
    with torch.no_grad():
        logp = torch.log_softmax(model(IDS).logits, -1)
        torch.testing.assert_close(logp.exp().sum(-1), torch.ones(IDS.shape), rtol=1e-5, atol=1e-5)
    nlls = [-logp[b, t - 1, labels[b, t]] for b in range(2) for t in range(1, IDS.shape[1])
            if labels[b, t] != -100]
    expected = torch.stack(nlls).mean()
    model.train()
    out = model(IDS, labels=labels)  # the head's fast nll path, no |V|-wide logits
    assert out.logits is None
    torch.testing.assert_close(out.loss.detach(), expected, rtol=1e-5, atol=1e-6)
    out.loss.backward()
    for name, p in model.named_parameters():
        assert p.grad is not None, name


@pytest.mark.parametrize("body, head",
                         [("nplm", "tree"), ("nplm", "split"), ("lbl", "split"), ("hlbl", "tree")])
def test_every_head_type_initialises_uniformly(body, head):
    model = build(body, head)
    r = model.config.initializer_range
    for name, p in model.lm_head.named_parameters():
        if p.ndim >= 2:
            assert 0 < p.abs().max() <= r and p.abs().max() > r / 2, name
        else:
            assert torch.all(p == 0), name


def sequence_logprob(model, prompt: list[int], continuation: list[int]) -> float:
    ids = torch.tensor([prompt + continuation])
    with torch.no_grad():
        logp = torch.log_softmax(model(ids).logits[0], -1)
    return sum(logp[len(prompt) - 1 + i, tok].item() for i, tok in enumerate(continuation))


@pytest.mark.parametrize("body", ["lbl", "hlbl"])
def test_beam_search_with_enough_beams_equals_exhaustive_search(body):
    torch.manual_seed(0)
    common = dict(vocab_size=4, context_size=2, hidden_size=3, initializer_range=1.0, bos_token_id=0,
                  eos_token_id=None, pad_token_id=0)
    if body == "lbl":
        model = plain_search(LBLForCausalLM(LBLConfig(**common)).eval())
    else:
        model = plain_search(HLBLForCausalLM(HLBLConfig(**common), tree=balanced_tree(4)).eval())
    prompt, steps = [1, 3], 3
    best = max(itertools.product(range(4), repeat=steps),
               key=lambda c: sequence_logprob(model, prompt, list(c)))
    out = model.generate(
        torch.tensor([prompt]), num_beams=4 ** (steps - 1), max_new_tokens=steps, do_sample=False,
        length_penalty=0.0, early_stopping=True,
    )
    assert out[0, len(prompt):].tolist() == list(best)


@pytest.mark.parametrize("body", ["lbl", "hlbl"])
def test_greedy_sampling_and_left_padding(body):
    model = (tiny_lbl(eos_token_id=None, pad_token_id=0) if body == "lbl"
             else tiny_hlbl(eos_token_id=None, pad_token_id=0))
    prompt = [4, 2, 6, 1, 3]
    out = model.generate(torch.tensor([prompt]), max_new_tokens=4, do_sample=False)[0].tolist()
    seq = list(prompt)
    with torch.no_grad():
        for _ in range(4):
            seq.append(int(model(torch.tensor([seq[-3:]])).logits[0, -1].argmax()))
    assert out == seq
    torch.manual_seed(3)
    a = model.generate(torch.tensor([prompt]), max_new_tokens=6, do_sample=True, num_return_sequences=2)
    torch.manual_seed(3)
    b = model.generate(torch.tensor([prompt]), max_new_tokens=6, do_sample=True, num_return_sequences=2)
    assert a.shape == (2, 11) and torch.equal(a, b)
    # A left-padded batch generates what each prompt generates alone.
    batch = torch.tensor([[0, 0, 5], [4, 2, 6]])
    mask = torch.tensor([[0, 0, 1], [1, 1, 1]])
    together = model.generate(batch, attention_mask=mask, max_new_tokens=3, do_sample=False)
    short = model.generate(torch.tensor([[5]]), max_new_tokens=3, do_sample=False)
    alone = model.generate(torch.tensor([[4, 2, 6]]), max_new_tokens=3, do_sample=False)
    assert together[0, 3:].tolist() == short[0, 1:].tolist()
    assert together[1, 3:].tolist() == alone[0, 3:].tolist()


# ----------------------------------------------------------------------------- Auto classes, bad input


def test_auto_classes_know_lbl_and_hlbl(tmp_path):
    assert hf_nlm.LBLConfig.model_type == "lbl" and hf_nlm.HLBLConfig.model_type == "hlbl"
    lbl = AutoModelForCausalLM.from_config(AutoConfig.for_model("lbl", vocab_size=9, hidden_size=3,
                                                                context_size=2))
    assert isinstance(lbl, LBLForCausalLM)
    tree = random_tree(9, seed=1)
    cfg = AutoConfig.for_model("hlbl", vocab_size=9, hidden_size=3, context_size=2,
                               **tree_config_fields(tree))
    assert isinstance(cfg, HLBLConfig) and cfg.tie_word_embeddings is False
    hlbl = HLBLForCausalLM(cfg, tree=tree)
    for i, model in enumerate([lbl, hlbl]):
        folder = tmp_path / str(i)
        model.save_pretrained(folder)
        assert isinstance(AutoConfig.from_pretrained(folder), type(model.config))
        loaded = AutoModelForCausalLM.from_pretrained(folder)
        assert type(loaded) is type(model)
        ids = torch.randint(0, 9, (2, 5))
        with torch.no_grad():
            assert torch.equal(model.eval()(ids).logits, loaded(ids).logits)


def test_loading_an_hlbl_checkpoint_as_lbl_is_refused(tmp_path):
    tiny_hlbl().save_pretrained(tmp_path)
    with pytest.raises(ValueError, match=r"model_type='hlbl'.*'lbl'"):
        LBLForCausalLM.from_pretrained(tmp_path)


@pytest.mark.parametrize(
    "config_class, kw, message",
    [
        (LBLConfig, {"head": "hierarchical"},
         "head must be one of softmax, .*split, tree; got 'hierarchical'"),
        (NPLMConfig, {"head": "adaptive"}, "head must be one of"),
        (LBLConfig, {"head": "split"}, "needs cutoffs"),
        (NPLMConfig, {"head": "split", "cutoffs": [3, 7]}, r"cutoff 7 is outside \(0, vocab_size=7\)"),
        (LBLConfig, {"head": "split", "cutoffs": [0, 3]}, "cutoff 0 is outside"),
        (LBLConfig, {"head": "split", "cutoffs": [4, 2]}, "strictly increasing"),
        (LBLConfig, {"cutoffs": [2]}, "cutoffs applies to head='split' only"),
        (LBLConfig, {"head": "tree", "tie_word_embeddings": False, "tree_num_nodes": 6}, "missing"),
        (LBLConfig, {"tree_num_nodes": 6, "tree_max_codes": 1, "tree_max_depth": 3},
         "apply to head='tree' only"),
        (LBLConfig, {"head": "tree", "tie_word_embeddings": True}, "tie_word_embeddings=False"),
        (HLBLConfig, {"head": "softmax"}, "HLBLConfig.head must be 'tree'"),
        (HLBLConfig, {"tree_num_nodes": 3, "tree_max_codes": 1, "tree_max_depth": 3}, "too small"),
        (LBLConfig, {"hidden_size": 0}, "hidden_size"),
        (LBLConfig, {"context_size": 0}, "context_size"),
    ],
)
def test_bad_config_is_rejected(config_class, kw, message):
    with pytest.raises(ValueError, match=message):
        config_class(**{"vocab_size": V, **kw})


def test_bad_trees_are_rejected():
    with pytest.raises(ValueError, match="needs a word tree"):
        HLBLForCausalLM(HLBLConfig(vocab_size=V))
    with pytest.raises(ValueError, match="covers 5 words but the config's vocab_size is 7"):
        HLBLForCausalLM(HLBLConfig(vocab_size=V), tree=balanced_tree(5))
    config = HLBLConfig(vocab_size=V, **tree_config_fields(balanced_tree(V)))
    with pytest.raises(ValueError, match="tree shape mismatch"):
        HLBLForCausalLM(config, tree=multi_code_tree())
    with pytest.raises(ValueError, match="config's head is 'softmax'"):
        LBLForCausalLM(LBLConfig(vocab_size=V), tree=balanced_tree(V))
    with pytest.raises(ValueError, match="set_tree needs a model with head='tree'"):
        LBLForCausalLM(LBLConfig(vocab_size=V)).set_tree(balanced_tree(V))
    # A head built from the config's shape alone holds no tree until weights are loaded.
    empty = HLBLForCausalLM(config)
    assert isinstance(empty.lm_head, TreeSoftmaxHead)
    with pytest.raises(ValueError, match="holds no tree yet"):
        empty.eval()(IDS)


def test_checkpoint_whose_tree_does_not_fit_its_config_is_refused(tmp_path):
    tiny_hlbl().save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    config["tree_max_codes"] = 1  # the saved tree has words with 2 codes
    (tmp_path / "config.json").write_text(json.dumps(config))
    # Refused with the buffers named, their shapes in the weights and from the config.
    with pytest.raises(ValueError, match=r"config\.json does not match the weights") as info:
        AutoModelForCausalLM.from_pretrained(tmp_path)
    assert "lm_head.tree_nodes: (7, 2, 4) in the weights, (7, 1, 4) from the config" in str(info.value)


# ----------------------------------------------------------------------------- command line


def write_corpus(folder):
    import random

    rng = random.Random(0)
    subjects, verbs, objects = ["the cat", "a dog", "the bird"], ["sat on", "saw"], ["the mat", "a log"]
    files = {}
    for split, n in [("train", 60), ("valid", 10), ("test", 10)]:
        lines = [f"{rng.choice(subjects)} {rng.choice(verbs)} {rng.choice(objects)}" for _ in range(n)]
        files[split] = folder / f"{split}.txt"
        files[split].write_text("\n".join(lines) + "\n")
    return ["--train-file", str(files["train"]), "--validation-file", str(files["valid"]),
            "--test-file", str(files["test"])]


TINY = ["--context-size", "2", "--embedding-size", "6", "--block-size", "8", "--batch-size", "4",
        "--optimizer", "adam", "--learning-rate", "0.05", "--lr-scheduler", "constant", "--no-progress-bar",
        "--early-stopping-patience", "none", "--num-epochs", "1", "--max-steps", "3"]


@pytest.mark.parametrize(
    "flags, head",
    [
        (["--model", "lbl"], "softmax"),
        (["--model", "lbl", "--head", "split", "--cutoffs", "4", "8", "--diagonal-context"], "split"),
        (["--model", "hlbl", "--tree", "huffman"], "tree"),
        (["--model", "nplm", "--hidden-size", "4", "--head", "tree", "--tree", "balanced"], "tree"),
    ],
)
def test_cli_trains_every_model_and_head(tmp_path, flags, head):
    from hf_nlm_cli import main

    out = tmp_path / "run"
    assert main(["train", *write_corpus(tmp_path), "--output-dir", str(out), *TINY, *flags]) == 0
    model = AutoModelForCausalLM.from_pretrained(out)
    assert model.config.model_type == flags[1] and model.config.head == head
    assert json.loads((out / "results.json").read_text())["test"]["perplexity"] > 1
    assert main(["generate", str(out), "the cat", "--num-beams", "2", "--max-new-tokens", "3"]) == 0


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--model", "hlbl", "--head", "softmax"], "always has a tree head"),
        (["--model", "lbl", "--hidden-size", "5"], "feature size D is --embedding-size"),
        (["--model", "lbl", "--tree", "random"], "need a tree head"),
        (["--model", "nplm", "--diagonal-context"], "hlbl / lbl only"),
        (["--model", "lbl", "--head", "split", "--cutoffs", "3", "500"], "cutoff 500 is outside"),
    ],
)
def test_cli_bad_model_flags_exit_2(tmp_path, capsys, flags, message):
    from hf_nlm_cli import main

    with pytest.raises(SystemExit) as exit_info:
        main(["train", *write_corpus(tmp_path), "--output-dir", str(tmp_path / "run"), *TINY, *flags])
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_build_tree_runs_the_papers_recipe(tmp_path, capsys):
    from hf_nlm_cli import main

    out = tmp_path / "hlbl"
    status = main(["build-tree", *write_corpus(tmp_path), "--output-dir", str(out), *TINY,
                   "--tree-mode", "adaptive", "--eps", "0.3"])
    assert status == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["tree"]["mode"] == "adaptive" and summary["tree"]["eps"] == 0.3
    assert summary["random_tree"]["test"]["perplexity"] > 1 and summary["data_tree"]["test"]["perplexity"] > 1
    # Step 1's run, the data-built tree, and the final model trained on that tree.
    assert (out / "random_tree" / "model.safetensors").is_file()
    tree = WordTree.load(out / "word_tree.json")
    model = AutoModelForCausalLM.from_pretrained(out)
    assert isinstance(model, HLBLForCausalLM)
    assert model.tree() == tree.renumbered_breadth_first()
    assert AutoModelForCausalLM.from_pretrained(out / "random_tree").tree() != model.tree()
    # The tree file feeds `hf-nlm train --tree-file` too.
    status = main(["train", *write_corpus(tmp_path), "--output-dir", str(tmp_path / "again"), *TINY,
                   "--model", "hlbl", "--tree-file", str(out / "word_tree.json")])
    assert status == 0
    assert AutoModelForCausalLM.from_pretrained(tmp_path / "again").tree() == model.tree()
    # Both stages are saved with the generation defaults `hf-nlm train` saves.
    fields = ("do_sample", "max_new_tokens", "min_new_tokens", "no_repeat_ngram_size",
              "begin_suppress_tokens", "suppress_tokens")
    saved = [GenerationConfig.from_pretrained(folder).to_dict() for folder in (tmp_path / "again", out,
                                                                                   out / "random_tree")]
    assert saved[0]["max_new_tokens"] and saved[0]["suppress_tokens"]
    for config in saved[1:]:
        assert {k: config.get(k) for k in fields} == {k: saved[0].get(k) for k in fields}


def test_build_tree_bad_eps_exits_2(tmp_path, capsys):
    from hf_nlm_cli import main

    with pytest.raises(SystemExit) as exit_info:
        main(["build-tree", *write_corpus(tmp_path), "--output-dir", str(tmp_path / "x"), *TINY,
              "--eps", "0.5"])
    assert exit_info.value.code == 2 and "--eps must lie in [0, 0.5)" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["build-tree", *write_corpus(tmp_path), "--output-dir", str(tmp_path / "x"), *TINY,
              "--tree-mode", "balanced", "--eps", "0.1"])
    assert "--eps applies to --tree-mode adaptive" in capsys.readouterr().err


def test_word_vectors_from_model_equal_word_vectors_from_predictions(toy_texts):
    from hf_nlm.data.lm import build_lm_dataset
    from hf_nlm.modeling_utils import shifted_targets
    from hf_nlm.tokenization import train_word_level_tokenizer
    from hf_nlm.training.tree_recipe import word_vectors_from_model
    from hf_nlm.trees import word_vectors_from_predictions

    tok = train_word_level_tokenizer(toy_texts)
    torch.manual_seed(0)
    model = HLBLForCausalLM(HLBLConfig(vocab_size=len(tok), context_size=2, hidden_size=3),
                            tree=random_tree(len(tok)))
    streamed = word_vectors_from_model(model, toy_texts, tok, block_size=4, batch_size=2)
    data, _ = build_lm_dataset(toy_texts, tok, block_size=1000, context_size=2)
    batch = data.__getitems__(list(range(len(data))))
    with torch.no_grad():
        hidden, targets = shifted_targets(model.model(batch["input_ids"]).last_hidden_state, batch["labels"])
    torch.testing.assert_close(streamed, word_vectors_from_predictions(hidden, targets, len(tok)))


def test_example_train_hlbl_runs(tmp_path, monkeypatch, capsys):
    import runpy
    from pathlib import Path

    script = Path(__file__).resolve().parents[2] / "examples" / "train_hlbl.py"
    out = tmp_path / "run"
    monkeypatch.setattr("sys.argv", ["train_hlbl.py", *write_corpus(tmp_path), "--output-dir", str(out),
                                     *TINY, "--tree-mode", "balanced"])
    runpy.run_path(str(script), run_name="__main__")
    printed = capsys.readouterr().out
    assert "balanced tree: test perplexity" in printed
    assert (out / "word_tree.json").is_file() and isinstance(AutoModelForCausalLM.from_pretrained(out),
                                                             HLBLForCausalLM)


def test_pipeline_text_generation_with_hlbl(tmp_path, toy_texts):
    from transformers import pipeline

    from hf_nlm.tokenization import train_word_level_tokenizer

    tok = train_word_level_tokenizer(toy_texts)
    torch.manual_seed(0)
    model = HLBLForCausalLM(HLBLConfig(vocab_size=len(tok), context_size=2, hidden_size=4),
                            tree=random_tree(len(tok)))
    model.save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    gen = pipeline("text-generation", model=str(tmp_path), tokenizer=str(tmp_path))
    out = gen("the cat", max_new_tokens=4, min_new_tokens=4, num_beams=2, do_sample=False,
              skip_special_tokens=False)[0]["generated_text"]
    assert out.startswith("the cat ") and len(out.split()) == 6


@pytest.mark.parametrize("make", [
    lambda: NPLMForCausalLM(NPLMConfig(vocab_size=V, context_size=3, embedding_size=4, hidden_size=5,
                                       bos_token_id=0)),
    lambda: NPLMForCausalLM(NPLMConfig(vocab_size=V, context_size=3, embedding_size=4, hidden_size=0,
                                       bos_token_id=0)),
    lambda: tiny_lbl(diagonal=False, context_size=3, bos_token_id=0),
    lambda: tiny_lbl(diagonal=True, context_size=3, bos_token_id=0),
], ids=["nplm", "nplm-mlp3", "lbl", "lbl-diagonal"])
@pytest.mark.parametrize("length", [1, 2, 3, 6])
def test_a_generation_step_reads_the_last_window_alone_and_scores_as_the_whole_forward(make, length):
    """forward(logits_to_keep=1) in eval mode, what each generate() step calls, cuts the last position's
    window from the last n - 1 tokens only: the same logits as scoring every position, with the input shorter
    than the window, as long, longer, and left-padded."""
    torch.manual_seed(0)
    model = make().eval()
    ids = torch.randint(0, V, (2, length), generator=torch.Generator().manual_seed(length))
    mask = torch.ones_like(ids)
    mask[1, : length // 2] = 0  # the second row left-padded
    with torch.no_grad():
        for m in (None, mask):
            whole = model(ids, attention_mask=m).logits[:, -1:]
            step = model(ids, attention_mask=m, logits_to_keep=1).logits
            torch.testing.assert_close(step, whole)
            assert torch.equal(model.model.last_context(ids, m), model.model.contexts(ids, m)[:, -1:])
