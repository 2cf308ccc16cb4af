"""What the web demo shows, as plain functions of loaded run folders: no Gradio here, so that each answer
can be computed (and tested) without a browser. :mod:`hf_nlm.app.page` lays them out as a page.

A :class:`Run` is a saved model folder (``hf-nlm train --output-dir``, ``make demo``'s
``demo-output/nplm-brown``) loaded once, with the n-gram model saved beside it if there is one. Every
function takes the user's text as typed and raises ``ValueError`` with a message for the page when the
text cannot be answered (empty, too long, nothing the model knows); anything else is our bug.
"""

from __future__ import annotations

import html
import json
import math
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

from ..data.lm import unknown_token_ids
from ..evaluation import token_log_probs
from ..evaluation.number_prediction import numeral_estimates, numeral_estimator
from ..generation import check_generation_settings
from ..ngram import NgramLM
from ..saved_run import load_run as load_saved_run
from ..story.generation import MAX_STORY_TOKENS, generate_story, generate_storyline, story_source
from ..tokenization.decoding import decode_generated

# ----------------------------------------------------------------------------- the page's limits
# One question costs at most what these allow, whatever a client posts (the sliders' ends are no limit to a
# client of the page's HTTP API): the server's memory above idle stays within the bound docs/app.md states
# (benchmarks/app_memory.py), and one question cannot hold the server for long.

#: The longest text the page reads, in tokens: a recurrent model reads 10,000 words in a second or two,
#: but a page that hangs on a pasted book serves nobody else meanwhile.
MAX_PROMPT_TOKENS = 2000
#: The longest text the page tokenizes at all, in characters (checked first: a pasted book costs nothing).
MAX_TEXT_CHARS = 40 * MAX_PROMPT_TOKENS
#: The longest story title, in tokens: a title is a few words, and both stages and the attention picture
#: (a column per source token) read it whole.
MAX_TITLE_TOKENS = 20
#: What one generation may take, in seconds: ``generate``'s ``max_time``, which ends the search there and
#: keeps what it has.
MAX_GENERATION_SECONDS = 30.0
#: The page's number controls: ``generate``'s argument (or the function's) -> (the control's name on the
#: page, lowest, highest, whole numbers only). The sliders' ranges come from here.
NUMBER_LIMITS = {
    "num_beams": ("the beams slider", 1, 10, True),
    "num_return_sequences": ("the hypotheses shown slider", 1, 10, True),
    "max_new_tokens": ("the new tokens slider", 1, 100, True),
    "temperature": ("the temperature field", 0.01, 100.0, False),
    "top_p": ("the top-p field", 0.0, 1.0, False),
    "k": ("the top k slider", 1, 50, True),
}
#: The n-gram model's file inside a run folder (``NgramLM.save``): the demo writes its Kneser-Ney 5-gram
#: there.
NGRAM_FILE = "ngram.json"


def page_number(name: str, value) -> int | float:
    """``value`` of the control ``name`` (:data:`NUMBER_LIMITS`), checked: ``ValueError`` naming the control
    for an empty field, a value that is not a number, or one outside its range."""
    control, low, high, whole = NUMBER_LIMITS[name]
    if value is None:  # a number field the user cleared
        raise ValueError(f"{control}: give a number")
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = math.nan
    if not low <= number <= high or (whole and number != int(number)):
        kind = "a whole number" if whole else "a number"
        raise ValueError(f"{control} takes {kind} from {low:g} to {high:g}, got {value!r}")
    return int(number) if whole else number


def page_wording(text: str) -> str:
    """A message of the command line's setting checks (:func:`hf_nlm.generation.check_generation_settings`)
    in the page's words: each flag, or setting name, becomes the control that sets it on the page, so that
    the library's messages stay shared and the page names what its user sees."""
    text = text.replace("drop --do-sample", "choose greedy or beam search")
    text = text.replace("drop do_sample", "choose greedy or beam search")
    text = re.sub(r"(?<![\w-])(?:--do-sample|do_sample)(?![\w-])", "sample search", text)
    for name, (control, *_) in NUMBER_LIMITS.items():
        spelled = name.replace("_", "[-_]")
        # "--temperature", "temperature", "the temperature"; a number right after the flag reads "at" it
        text = re.sub(rf"(?:\bthe )?(?<![\w-])(?:--)?{spelled}(?![\w-])( (?=[-+]?[\d.]))?",
                      lambda m, c=control: c + (" at " if m.group(1) else ""),
                      text) if len(name) > 1 else text
    return text


@dataclass
class Run:
    """A saved model folder, loaded once: ``name`` (how the page lists it: the folder's name, with as many
    parent folders as it takes to tell it from another run's), the model in evaluation mode, its tokenizer,
    the n-gram model found in a subfolder (``NgramLM.save``), if any, and ``problems``, what could not be
    loaded beside the model (a broken n-gram model: the run is served without it)."""

    name: str
    folder: Path
    model: object
    tokenizer: object
    ngram: NgramLM | None = None
    ngram_name: str | None = None
    kind: set[str] = field(default_factory=set)
    problems: list[str] = field(default_factory=list)


def load_page_run(folder: str | Path) -> Run:
    """Load the model, tokenizer and n-gram model of ``folder``; ``ValueError`` naming the folder if it is not
    a saved model (the message of ``hf-nlm generate``). An n-gram model that does not load leaves the run
    without one, the reason in ``problems``."""
    folder = Path(folder)
    try:
        model, tokenizer = load_saved_run(folder)
    except FileNotFoundError as err:
        raise ValueError(str(err)) from None
    model.eval()
    run = Run(name=folder.resolve().name, folder=folder, model=model, tokenizer=tokenizer)
    found = sorted(p.parent for p in folder.glob(f"*/{NGRAM_FILE}"))
    if found:
        try:
            run.ngram, run.ngram_name = NgramLM.load(found[0]), found[0].name
        except Exception as err:  # noqa: BLE001 -- any broken side file: the model itself is still served
            run.problems.append(f"{folder}: served without its n-gram model, which does not load: "
                                f"{failure(err, found[0])}")
    run.kind = capabilities(model)
    return run


def failure(err: Exception, folder: Path) -> str:
    """What went wrong reading ``folder``, naming the file: the error's own text where it names one, else
    the file the error carries or (a JSON error) the folder's JSON file, else the folder."""
    text = str(err) or type(err).__name__
    if str(folder) in text:
        return text
    file = getattr(err, "filename", None) or (folder / NGRAM_FILE if isinstance(err, json.JSONDecodeError)
                                               else folder)
    return f"{file}: {text}"


def capabilities(model) -> set[str]:
    """The tabs a model supports: ``"lm"`` (continue a prompt, next words, surprisal) for a causal LM,
    ``"numeracy"`` for a numeracy LM, ``"seq2seq"`` for an encoder-decoder (a story stage), ``"tree"`` for a
    tree-softmax head."""
    kinds = set()
    if getattr(model.config, "is_encoder_decoder", False):
        kinds.add("seq2seq")
    else:
        kinds.add("lm")
    if getattr(model.config, "numeral_vocab", None):
        kinds.add("numeracy")
    if hasattr(getattr(model, "lm_head", None), "tree_nodes"):
        kinds.add("tree")
    return kinds


def load_runs(folders) -> tuple[list[Run], list[str]]:
    """Every folder of ``folders`` that loads, each under a name of its own (:func:`distinct_names`), and
    one message per folder that does not, or that loads in part: the page shows those and serves the
    rest."""
    runs, problems, seen = [], [], set()
    for folder in folders:
        if Path(folder).resolve() in seen:
            problems.append(f"{folder} is given twice: served once")
            continue
        seen.add(Path(folder).resolve())
        try:
            run = load_page_run(folder)
        except Exception as err:  # noqa: BLE001 -- one broken folder must not keep the others off the page
            text = str(err) or type(err).__name__
            problems.append(text if str(folder) in text else f"{folder} does not load: {text}")
            continue
        runs.append(run)
        problems.extend(run.problems)
    for run, name in zip(runs, distinct_names([run.folder for run in runs]), strict=True):
        run.name = name
    return runs, problems


def distinct_names(folders: list[Path]) -> list[str]:
    """Each folder's name, with as many of its parent folders as it takes to tell it from the others'
    (``a/lm`` and ``b/lm``; ``nplm`` where it is the only one of that name)."""
    parts = [Path(folder).resolve().parts for folder in folders]
    names = []
    for mine in parts:
        depth = 1
        while depth < len(mine) and sum(other[-depth:] == mine[-depth:] for other in parts) > 1:
            depth += 1
        names.append(Path(*mine[-depth:]).as_posix())
    return names


# ----------------------------------------------------------------------------- reading the user's text

def read_text(tokenizer, text, what: str = "prompt", max_tokens: int = MAX_PROMPT_TOKENS) -> torch.Tensor:
    """The token ids (1, T) of ``text``, checked for the page: ``ValueError`` for an empty text, one of more
    than :data:`MAX_TEXT_CHARS` characters (before tokenizing it), one holding what is not text (an unpaired
    surrogate, which a JSON client can post) or more than ``max_tokens`` tokens."""
    if text is None or not str(text).strip():
        raise ValueError(f"Type a {what} first: the {what} is empty.")
    text = str(text)
    if len(text) > MAX_TEXT_CHARS:
        raise ValueError(f"The {what} has {len(text):,} characters; this page reads at most "
                         f"{MAX_TEXT_CHARS:,}. Paste a shorter text.")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:
        raise ValueError(f"The {what} holds a character that is not text at position {err.start} "
                         f"({text[err.start]!r}).") from None
    ids = tokenizer(text, return_tensors="pt", add_special_tokens=False).input_ids
    if ids.shape[1] == 0:
        raise ValueError(f"The {what} holds no token this model reads.")
    if ids.shape[1] > max_tokens:
        raise ValueError(f"The {what} has {ids.shape[1]:,} tokens; this page reads at most "
                         f"{max_tokens:,}. Paste a shorter text.")
    return ids


def encode_prompt(run: Run, text: str, what: str = "prompt") -> tuple[torch.Tensor, str | None]:
    """``(ids (1, T), warning)``: the text's token ids (:func:`read_text`: at most
    :data:`MAX_PROMPT_TOKENS`), and a note when half of them or more are unknown words."""
    ids = read_text(run.tokenizer, text, what)
    unknown = int(torch.isin(ids, torch.tensor(unknown_token_ids(run.tokenizer))).sum())
    warning = None
    if unknown and 2 * unknown >= ids.shape[1]:
        warning = (f"{unknown} of the {ids.shape[1]} tokens of the {what} are not in the model's vocabulary "
                   f"(they read as {run.tokenizer.unk_token}): the model has little to go on.")
    return ids, warning


def generation_settings(search: str, num_beams: int = 5, num_return_sequences: int = 3,
                        temperature: float = 1.0, top_p: float = 1.0, max_new_tokens: int = 20,
                        no_repeat_ngram_size: int | None = None) -> dict:
    """``generate()`` keyword arguments for ``search`` in ``("greedy", "beam", "sample")``: each control the
    search uses within the page's range (:data:`NUMBER_LIMITS`), then checked with the command line's rules
    (:func:`hf_nlm.generation.check_generation_settings`), whose messages name the page's controls
    (:func:`page_wording`). ``generate`` stops after :data:`MAX_GENERATION_SECONDS`."""
    if search not in ("greedy", "beam", "sample"):
        raise ValueError(f"search must be greedy, beam or sample, got {search!r}")
    sample = search == "sample"
    max_new_tokens = page_number("max_new_tokens", max_new_tokens)
    beams = page_number("num_beams", num_beams) if search == "beam" else 1
    n = page_number("num_return_sequences", num_return_sequences) if search != "greedy" else 1
    if sample:
        temperature, top_p = page_number("temperature", temperature), page_number("top_p", top_p)
    try:
        check_generation_settings(
            do_sample=sample, temperature=temperature if sample else None, top_p=top_p if sample else None,
            no_repeat_ngram_size=no_repeat_ngram_size, max_new_tokens=max_new_tokens, num_return_sequences=n,
            num_beams=beams,
        )
    except ValueError as err:
        raise ValueError(page_wording(str(err))) from None
    settings = {"do_sample": sample, "num_beams": beams, "num_return_sequences": n,
                "max_new_tokens": max_new_tokens, "max_time": MAX_GENERATION_SECONDS}
    if sample:
        settings.update(temperature=temperature, top_p=top_p, top_k=0)
    if no_repeat_ngram_size is not None:
        settings["no_repeat_ngram_size"] = int(no_repeat_ngram_size)
    return settings


def saved_search(run: Run) -> dict:
    """The search the run's saved generation config makes (what ``model.generate``, ``pipeline`` and ``hf-nlm
    generate`` do with no settings given), as :func:`continue_prompt`'s options: ``search``, ``num_beams``,
    ``max_new_tokens``. The page starts from these, so that it answers as every other door does."""
    config = run.model.generation_config
    beams = int(config.num_beams or 1)
    search = "sample" if config.do_sample else "beam" if beams > 1 else "greedy"
    return {"search": search, "num_beams": beams, "max_new_tokens": int(config.max_new_tokens or 20)}


# ----------------------------------------------------------------------------- 1. continue a prompt

@torch.no_grad()
def continue_prompt(run: Run, prompt: str, search: str = "beam", seed: int | None = None, **options) -> dict:
    """Continue ``prompt`` by greedy search, beam search (the n best) or sampling (``seed`` fixes the draw).

    Returns ``{"hypotheses": [{"text", "full_text", "log_prob", "tokens": [(token, probability)]}], "warning",
    "seconds"}``: each hypothesis's continuation, alone (``text``) and after the prompt (``full_text``,
    :func:`decode_generated`), its tokens, up to and including the end of text if it wrote one, with the
    probability the model gives each one after the prompt and the tokens before it, and ``log_prob`` their sum
    (natural log), the model's own probability of the continuation. The search may rank by more than that (a
    repetition rule, a length penalty), so the list keeps the search's order. A numeral outside the vocabulary
    that an open numeracy head wrote shows as itself, with the probability of ``<unk_num>`` (every unseen
    numeral)."""
    if "lm" not in run.kind:
        raise ValueError(f"{run.name} is an encoder-decoder model: use the Story tab.")
    settings = generation_settings(search, **options)
    ids, warning = encode_prompt(run, prompt)
    start = time.perf_counter()
    if seed is not None:
        torch.manual_seed(int(seed))
    out = run.model.generate(ids, attention_mask=torch.ones_like(ids),
                             pad_token_id=run.tokenizer.pad_token_id, return_dict_in_generate=True,
                             **settings)
    numerals = getattr(out, "numerals", None) or [{} for _ in out.sequences]
    sequences = out.sequences
    P, eos = ids.shape[1], run.model.generation_config.eos_token_id
    # The model's own probability of each generated token: one forward pass over prompt + continuation, with
    # the logits of the continuation's positions only (a long prompt's would take (beams, T, vocab) floats).
    log_probs = torch.log_softmax(run.model(sequences, attention_mask=torch.ones_like(sequences),
                                            logits_to_keep=sequences.shape[1] - P + 1).logits.float(), -1)
    stops = set([eos] if isinstance(eos, int) else eos or [])
    hypotheses = []
    for b, seq in enumerate(sequences):
        new = seq[P:].tolist()
        # A hypothesis ends at its first end of text: what follows is the padding of a batch of unequal
        # lengths.
        end = next((t + 1 for t, i in enumerate(new) if i in stops), len(new))
        new = seq[P:P + end]
        picked = log_probs[b, :end].gather(-1, new[:, None]).squeeze(-1)
        written = {t - P: text for t, text in numerals[b].items() if P <= t < P + end}
        tokens = [written.get(t, token)
                  for t, token in enumerate(run.tokenizer.convert_ids_to_tokens(new.tolist()))]
        hypotheses.append({
            "text": decode_generated(run.tokenizer, new, written),
            "full_text": decode_generated(run.tokenizer, new, written, prompt=prompt),
            "log_prob": float(picked.sum()),
            "tokens": [(token, float(p)) for token, p in zip(tokens, picked.exp().tolist(), strict=True)],
        })
    return {"hypotheses": hypotheses, "warning": warning, "seconds": time.perf_counter() - start}


# ----------------------------------------------------------------------------- 2. next words, surprisal

@torch.no_grad()
def next_words(run: Run, prompt: str, k: int = 10) -> dict:
    """The ``k`` likeliest next tokens after ``prompt`` that generation may write: ``{"model": [(token, p)],
    "ngram": [(token, p)] or None, "model_not_ranked": [(token, p)], "ngram_not_ranked": [(token, p)] or
    None, "warning"}``, the n-gram model's from the last n - 1 tokens (the sentence start before a short
    prompt). The tokens generation never writes (:func:`suppressed_ids`: ``<unk>``, which stands for every
    word outside the vocabulary at once) are not ranked among the words; their probabilities come apart, in
    ``*_not_ranked``. Every probability is the model's own (nothing is renormalised)."""
    if "lm" not in run.kind:
        raise ValueError(f"{run.name} is an encoder-decoder model: use the Story tab.")
    k = page_number("k", k)
    ids, warning = encode_prompt(run, prompt)
    log_p = torch.log_softmax(run.model(ids, attention_mask=torch.ones_like(ids)).logits[0, -1].float(), -1)
    left_out = suppressed_ids(run)
    result = {"model": top_tokens(run, log_p, k, left_out), "ngram": None,
              "model_not_ranked": token_probabilities(run, log_p, left_out), "ngram_not_ranked": None,
              "warning": warning}
    if run.ngram is not None:
        ngram_log_p = torch.from_numpy(ngram_next_log_probs(run.ngram, ids[0].tolist()))
        result["ngram"] = top_tokens(run, ngram_log_p, k, left_out)
        result["ngram_not_ranked"] = token_probabilities(run, ngram_log_p, left_out)
    return result


def suppressed_ids(run: Run) -> list[int]:
    """The tokens the run's generation never writes (its generation config's ``suppress_tokens``:
    ``<unk>``, :func:`hf_nlm.generation.generation_defaults`)."""
    return sorted({int(i) for i in run.model.generation_config.suppress_tokens or []})


def ngram_next_log_probs(ngram: NgramLM, ids: list[int]):
    """The n-gram model's log-distribution of the next token after ``ids`` (the sentence start fills a short
    context, as in training)."""
    n = ngram.order - 1
    context = ([ngram.bos_id] * n + ids)[-n:] if n else []
    return ngram.log_probs([context])[0]


def top_tokens(run: Run, log_p: torch.Tensor, k: int, left_out: list[int] = ()) -> list[tuple[str, float]]:
    """The ``k`` likeliest tokens of ``log_p`` but ``left_out``, with their probabilities."""
    log_p = log_p.double().clone()
    log_p[list(left_out)] = -math.inf
    return token_probabilities(run, log_p, log_p.topk(min(k, log_p.numel() - len(left_out))).indices.tolist())


def token_probabilities(run: Run, log_p: torch.Tensor, ids: list[int]) -> list[tuple[str, float]]:
    """Each token of ``ids`` with its probability under ``log_p``."""
    return list(zip(run.tokenizer.convert_ids_to_tokens(ids), log_p.double()[ids].exp().tolist(),
                    strict=True))


def text_surprisal(run: Run, text: str) -> dict:
    """Every token of ``text`` with its surprisal -log2 p(token | what precedes it) in bits, read as the
    evaluation reads a split (the text as one paragraph, its sentence boundary included):
    ``{"tokens": [(token, bits)], "perplexity", "ngram_tokens", "ngram_perplexity", "warning"}``."""
    if "lm" not in run.kind:
        raise ValueError(f"{run.name} is an encoder-decoder model: use the Story tab.")
    _, warning = encode_prompt(run, text, what="text")
    ids, log_p, _ = token_log_probs(run.model, [text], run.tokenizer)
    bits = (-log_p.double() / math.log(2)).tolist()
    tokens = run.tokenizer.convert_ids_to_tokens(ids.tolist())
    result = {"tokens": list(zip(tokens, bits, strict=True)), "perplexity": 2 ** (sum(bits) / len(bits)),
              "ngram_tokens": None, "ngram_perplexity": None, "warning": warning}
    if run.ngram is not None:
        ngram_bits = (-run.ngram.stream_log_probs(ids.numpy()) / math.log(2)).tolist()
        result["ngram_tokens"] = list(zip(tokens, ngram_bits, strict=True))
        result["ngram_perplexity"] = 2 ** (sum(ngram_bits) / len(ngram_bits))
    return result


# ----------------------------------------------------------------------------- 3. numeracy

@torch.no_grad()
def next_numeral(run: Run, context: str, k: int = 10, interval: float = 0.8) -> dict:
    """What a numeracy LM expects as the next numeral after ``context``: ``{"numerals": [(numeral, p(numeral |
    context, a numeral comes))], "unseen": (text, p) or None, "p_numeral", "median", "low", "high",
    "warning"}``. ``numerals`` are the vocabulary's likeliest (``<unk_num>`` standing for all the others); an
    open head (d-RNN, MoG, DExp, combination) also writes the numeral outside the vocabulary its decoder would
    write there (``unseen``; None when that one is in the vocabulary). The median and the central ``interval``
    come from the head's density (MoG, DExp) or its distribution over the vocabulary's numerals
    (:func:`hf_nlm.evaluation.number_prediction.numeral_estimates`)."""
    if "numeracy" not in run.kind:
        raise ValueError(f"{run.name} is not a numeracy LM.")
    ids, warning = encode_prompt(run, context, what="context")
    model, head = run.model, run.model.lm_head
    hidden = model(ids, attention_mask=torch.ones_like(ids),
                   output_hidden_states=True).hidden_states[-1][0, -1:]
    log_p = torch.log_softmax(head(hidden)[0].float(), -1)
    vocab = model.config.numeral_vocab
    ids_of = torch.tensor(list(vocab.values()))
    p_numeral = float(log_p[ids_of].exp().sum())
    names = list(vocab)
    order = log_p[ids_of].argsort(descending=True)[:k].tolist()
    numerals = [(names[i], float(log_p[ids_of[i]].exp()) / p_numeral) for i in order]
    unseen = None
    if getattr(head, "open_numeral_vocabulary", False):
        texts, scores = head.best_unknown_numerals(hidden)
        # -inf: what the decoder writes here is a numeral of the vocabulary
        if math.isfinite(float(scores[0])):
            unseen = (texts[0], math.exp(float(scores[0])) / p_numeral)
    density, listed = numeral_estimator(head, run.tokenizer)
    low_q, high_q = (1 - interval) / 2, (1 + interval) / 2
    median, low, high = (float(x.reshape(-1)[0])
                         for x in numeral_estimates(head, density, listed, hidden, "median", low_q, high_q))
    return {"numerals": numerals, "unseen": unseen, "p_numeral": p_numeral, "median": median, "low": low,
            "high": high, "interval": interval, "warning": warning}


# ----------------------------------------------------------------------------- 4. story

def tell_story(storyline_run: Run, story_run: Run, title: str, attention_png: str | Path | None = None,
               num_beams: int = 5) -> dict:
    """Title -> storyline -> story (Yao et al. 2019, Plan-and-Write) by beam search, each stage an
    encoder-decoder run: ``{"title", "storyline": [phrases], "story"}``; with ``attention_png``, the story
    stage's attention over its source (title and storyline) drawn there
    (:func:`hf_nlm.plots.attention.plot_attention`). The title has at most :data:`MAX_TITLE_TOKENS` tokens;
    each search stops after :data:`MAX_GENERATION_SECONDS`."""
    from ..plots.attention import plot_attention

    for run in (storyline_run, story_run):
        if "seq2seq" not in run.kind:
            raise ValueError(f"{run.name} is not an encoder-decoder model: a story stage is one.")
    for run in (storyline_run, story_run):  # each stage reads the title with its own tokenizer
        read_text(run.tokenizer, title, "title", MAX_TITLE_TOKENS)
    search = {"num_beams": num_beams, "max_time": MAX_GENERATION_SECONDS}
    keywords = generate_storyline(storyline_run.model, storyline_run.tokenizer, title, **search)
    story = generate_story(story_run.model, story_run.tokenizer, title, keywords, **search)
    if attention_png is not None:  # the same search as generate_story's: the picture shows the story shown
        plot_attention(story_run.model, story_run.tokenizer, story_source(title, keywords), attention_png,
                       max_new_tokens=MAX_STORY_TOKENS, **search)
    return {"title": title.strip(), "storyline": keywords, "story": story}


# ----------------------------------------------------------------------------- 5. the tree

@torch.no_grad()
def tree_path(run: Run, context: str, word: str) -> dict:
    """The path of ``word`` through a tree-softmax head's tree after ``context`` (Mnih & Hinton 2008, eq. 3):
    for each code of the word, one row per internal node from the root, with the branch taken (0 left, 1
    right), sigma(+-(h . q_i + b_i)) the probability of that branch, the product so far, and how many words
    lie below the node. ``{"word", "codes": [[row]], "probability"}``: the word's probability is the sum
    over its codes of each code's product."""
    if "tree" not in run.kind:
        raise ValueError(f"{run.name} has no tree-softmax head.")
    ids, _ = encode_prompt(run, context, what="context")
    word_ids = read_text(run.tokenizer, word, "word")[0].tolist()
    if len(word_ids) != 1:
        raise ValueError(f"Type one word of the vocabulary; the word reads as {len(word_ids)} tokens.")
    head = run.model.lm_head
    hidden = run.model(ids, attention_mask=torch.ones_like(ids),
                       output_hidden_states=True).hidden_states[-1][0, -1]
    tree = head.tree()
    below = words_below(tree)
    codes, total = [], 0.0
    for code in tree.codes(word_ids[0]):
        rows, running = [], 1.0
        for node, bit in code:
            score = (float(hidden.float() @ head.weight[node].float())
                     + (float(head.bias[node]) if head.bias is not None else 0.0))
            p = 1 / (1 + math.exp(-score if bit else score))
            running *= p
            rows.append({"node": node, "bit": bit, "probability": p, "path_probability": running,
                         "words_below": below[node]})
        codes.append(rows)
        total += running
    token = run.tokenizer.convert_ids_to_tokens(word_ids)[0]
    return {"word": token, "codes": codes, "probability": total}


def words_below(tree) -> list[int]:
    """How many leaves each internal node of ``tree`` has below it (a word with two codes counted twice)."""
    children = [list(map(int, pair)) for pair in tree.children]
    count = [0] * len(children)
    for node in reversed(range(len(children))):  # breadth-first numbering: children after their parent
        count[node] = sum(1 if child < 0 else count[child] for child in children[node])
    return count


# ----------------------------------------------------------------------------- HTML for the page

def probability_colour(p: float) -> str:
    """Background of a token of probability ``p``: from white (p = 0) to a strong green (p = 1), on a log
    scale down to 1e-4 so that the usual probabilities of a language model differ visibly."""
    level = 0.0 if p <= 0 else min(1.0, max(0.0, 1 + math.log10(max(p, 1e-4)) / 4))
    return f"rgba(46, 160, 67, {0.08 + 0.8 * level:.2f})"


def surprisal_colour(bits: float, top: float = 20.0) -> str:
    """Background of a token of surprisal ``bits``: white at 0, red at ``top`` bits and above."""
    return f"rgba(215, 58, 73, {0.05 + 0.85 * min(bits, top) / top:.2f})"


def token_strip(pairs, colour, title) -> str:
    """Tokens as coloured spans (a heat strip), each with its figure in the tooltip."""
    return " ".join(f'<span class="tok" title="{title(x)}" style="background:{colour(x)};padding:1px 3px;'
                    f'border-radius:3px">{html.escape(token)}</span>' for token, x in pairs)


def hypotheses_html(result: dict) -> str:
    """The n-best table: rank, the continuation, its log-probability and its tokens as a probability strip."""
    rows = "".join(
        f"<tr><td>{i}</td><td class='text'>{html.escape(h['text'])}</td><td>{h['log_prob']:.2f}</td>"
        f"<td>{token_strip(h['tokens'], probability_colour, lambda p: f'p = {p:.3g}')}</td></tr>"
        for i, h in enumerate(result["hypotheses"], 1))
    return ("<table id='nbest'><thead><tr><th>#</th><th>continuation</th><th>log p</th>"
            f"<th>p of each token (greener: likelier)</th></tr></thead><tbody>{rows}</tbody></table>")


def surprisal_html(pairs, perplexity: float, name: str) -> str:
    strip = token_strip(pairs, surprisal_colour, lambda bits: f"{bits:.2f} bits")
    return (f"<p><b>{html.escape(name)}</b>: perplexity {perplexity:,.2f} (redder: more surprising)</p>"
            f"<p>{strip}</p>")


def table_html(rows, columns, element_id: str | None = None) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(cell))}</td>" for cell in row) + "</tr>"
                   for row in rows)
    ident = f" id='{element_id}'" if element_id else ""
    return f"<table{ident}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


__all__ = ["MAX_GENERATION_SECONDS", "MAX_PROMPT_TOKENS", "MAX_TEXT_CHARS", "MAX_TITLE_TOKENS",
           "NUMBER_LIMITS", "Run", "capabilities", "continue_prompt", "distinct_names", "encode_prompt",
           "generation_settings", "hypotheses_html", "load_page_run", "load_runs", "next_numeral",
           "next_words", "page_number", "page_wording", "read_text", "surprisal_html", "table_html",
           "tell_story", "text_surprisal", "tree_path"]
