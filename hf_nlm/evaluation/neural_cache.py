"""The neural cache pointer: a recurrent LM's perplexity with a continuous cache of its own past states.

E. Grave, A. Joulin, N. Usunier, "Improving Neural Language Models with a Continuous Cache", ICLR 2017.

A recurrent LM reads x_1 .. x_t and its last layer outputs h_t, from which the head gives
p_vocab(w | h_t). The cache stores the pairs (h_i, x_{i+1}) of the last ``window`` positions and
points back at the words that followed states similar to the present one (sec. 3, eq. 2):

    p_cache(w | h_1..t, x_1..t)  proportional to  sum_{i in window, x_{i+1} = w} exp(theta * h_t . h_i)

and the two distributions are mixed linearly (sec. 3, "linear interpolation"):

    p(w | h_t) = (1 - lambda) p_vocab(w | h_t) + lambda p_cache(w | h_1..t, x_1..t).

The cache is not trained: the model is any trained recurrent LM (here AWD-LSTM, whose reference
results with the cache are PTB 52.8 and WikiText-2 52.0 test perplexity); ``window``, ``theta`` and
``lambda`` are tuned on validation data. With no history yet (the first target of a stream) p is
p_vocab.

The split is read as one stream exactly as :func:`hf_nlm.evaluation.evaluate_lm` reads it (one
sentence-boundary token, then every line followed by ``<eos>``), one sequence (batch 1), the
recurrent state carried from chunk to chunk, so every position sees the whole stream before it.
Within a chunk everything is vectorised: one (T, window + T) matrix of scores per chunk.
"""

from __future__ import annotations

import math

import torch
from tqdm.auto import tqdm

from ..data.batching import is_stateful, split_texts
from ..data.lm import bos_token_id, stream_stats, tokenize_corpus
from ..data.stream import bptt_chunks, stream_columns
from ..heads import OutputHead
from .report import perplexity_report
from .scoring import eval_mode


def check_cache_settings(window: int, theta: float, lambda_: float) -> None:
    """Raise ``ValueError`` unless ``window`` >= 1, ``theta`` >= 0 (finite) and ``lambda_`` in [0, 1]."""
    if isinstance(window, bool) or not isinstance(window, int) or window < 1:
        raise ValueError(f"neural cache: window must be an integer >= 1 (positions remembered), "
                         f"got {window!r}")
    if not (math.isfinite(theta) and theta >= 0):
        raise ValueError(f"neural cache: theta (the flatness of eq. 2's softmax) must be finite and >= 0, "
                         f"got {theta!r}")
    if not 0.0 <= lambda_ <= 1.0:  # also refuses NaN
        raise ValueError(
            f"neural cache: lambda (the cache's weight in the interpolation) must lie in [0, 1], "
            f"got {lambda_!r}"
        )


class NeuralCache:
    """The memory of the last ``window`` pairs (h_i, x_{i+1}) and eq. 2 + the linear interpolation.

    Feed the positions of a stream in order, one chunk at a time: every call scores the chunk's
    positions against the memory and the chunk's own earlier positions, then appends the chunk to the
    memory (keeping the last ``window`` pairs).

    Args:
        window: how many previous positions the cache holds (the paper's cache size).
        theta: inverse temperature of eq. 2; 0 makes p_cache the word frequencies of the window.
        lambda_: the cache's weight in p = (1 - lambda) p_vocab + lambda p_cache.
    """

    def __init__(self, window: int, theta: float, lambda_: float) -> None:
        check_cache_settings(window, theta, lambda_)
        self.window, self.theta, self.lambda_ = window, float(theta), float(lambda_)
        self.reset()

    def reset(self) -> None:
        """Forget the history (the start of a new, unrelated stream)."""
        self.keys: torch.Tensor | None = None  # (M, D) h_i of the remembered positions
        self.words: torch.Tensor | None = None  # (M,) x_{i+1}, the word that followed each h_i

    def __len__(self) -> int:
        return 0 if self.keys is None else self.keys.shape[0]

    def _scores(self, hidden: torch.Tensor, next_words: torch.Tensor):
        """theta * h_t . h_i over memory + chunk, with the keys outside each position's window at -inf.

        Returns (scores (T, M + T), key words (M + T,), has_history (T,)), and appends the chunk to
        the memory.
        """
        if hidden.ndim != 2 or next_words.shape != hidden.shape[:1]:
            raise ValueError(
                f"neural cache: expected hidden (T, D) and next_words (T,), got {tuple(hidden.shape)} and "
                f"{tuple(next_words.shape)}"
            )
        # Dot products of tanh-bounded states in half precision lose the ranking eq. 2 depends on.
        hidden = hidden.float()
        next_words = next_words.to(hidden.device)
        if self.keys is None:
            keys, words = hidden, next_words
        else:
            keys, words = torch.cat([self.keys, hidden]), torch.cat([self.words, next_words])
        T, M = hidden.shape[0], keys.shape[0] - hidden.shape[0]
        query_pos = torch.arange(T, device=hidden.device)[:, None]
        key_pos = torch.arange(M + T, device=hidden.device)[None, :] - M  # relative to the chunk's start
        # Position t sees i in [t - window, t - 1]: x_{i+1} is known by then (it is x_t at the latest).
        visible = (key_pos < query_pos) & (key_pos >= query_pos - self.window)
        scores = (self.theta * (hidden @ keys.T)).masked_fill(~visible, float("-inf"))
        # Only the last `window` pairs can be seen from the next chunk on.
        self.keys, self.words = keys[-self.window :], words[-self.window :]
        return scores, words, visible.any(dim=1)

    def _log_weights(self) -> tuple[float, float]:
        # log(1 - lambda), log(lambda); -inf at the ends so that lambda = 0 leaves p_vocab bit for bit.
        lam = self.lambda_
        return (math.log1p(-lam) if lam < 1 else float("-inf")), (math.log(lam) if lam > 0 else float("-inf"))

    def log_probs(
        self, hidden: torch.Tensor, next_words: torch.Tensor, vocab_log_probs: torch.Tensor
    ) -> torch.Tensor:
        """log p(x_{t+1}) of the interpolated model for every position t of a chunk.

        Args:
            hidden: h_t, the last layer's outputs at the chunk's positions, (T, D).
            next_words: x_{t+1}, the word each position predicts, (T,) ids.
            vocab_log_probs: log p_vocab(x_{t+1} | h_t), (T,).

        Returns:
            (T,) float32 natural-log probabilities; then the chunk joins the memory.
        """
        scores, words, has_history = self._scores(hidden, next_words)
        next_words = next_words.to(scores.device)
        vocab = vocab_log_probs.to(scores.device, torch.float32)
        # log p_cache(x_{t+1}) = logsumexp over the visible keys followed by x_{t+1} - logsumexp over all.
        same_word = words[None, :] == next_words[:, None]
        log_cache = scores.masked_fill(~same_word, float("-inf")).logsumexp(-1) - scores.logsumexp(-1)
        log_keep, log_lam = self._log_weights()
        mixed = torch.logaddexp(vocab + log_keep, log_cache + log_lam)
        # No history: -inf - -inf above gave NaN; the paper's p is then p_vocab alone.
        return torch.where(has_history, mixed, vocab)

    def full_log_probs(
        self, hidden: torch.Tensor, next_words: torch.Tensor, vocab_log_probs: torch.Tensor
    ) -> torch.Tensor:
        """The whole interpolated distribution log p(w | h_t) over the vocabulary, (T, |V|).

        Same arguments as :meth:`log_probs` except ``vocab_log_probs``: log p_vocab(w | h_t) for every
        word, (T, |V|). ``next_words`` are still needed: the chunk's earlier positions are keys of its
        later ones. Costs a (T, |V|) tensor; evaluation needs only :meth:`log_probs`.
        """
        scores, words, has_history = self._scores(hidden, next_words)
        vocab = vocab_log_probs.to(scores.device, torch.float32)
        # Rows without history are all -inf; give them a finite normaliser so they come out as zeros.
        norm = scores.logsumexp(-1, keepdim=True).nan_to_num(neginf=0.0)
        attention = (scores - norm).exp()
        p_cache = vocab.new_zeros(vocab.shape).scatter_add_(1, words[None, :].expand_as(attention), attention)
        mixed = ((1.0 - self.lambda_) * vocab.exp() + self.lambda_ * p_cache).log()
        return torch.where(has_history[:, None], mixed, vocab)


def head_log_probs(model, hidden: torch.Tensor) -> torch.Tensor:
    """log p_vocab(w | h) for every word, (..., |V|), from ``model.lm_head``.

    An :class:`~hf_nlm.heads.OutputHead` gives exact log-probabilities from ``log_probs``; any other
    head's output (e.g. an ``nn.Linear``'s logits) is normalised with ``log_softmax``.
    """
    head = model.lm_head
    if isinstance(head, OutputHead):
        return head.log_probs(hidden).float()
    return torch.log_softmax(head(hidden).float(), dim=-1)


def head_target_log_probs(model, hidden: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """log p_vocab(target | h) per position: the head's own ``nll`` when it has one.

    Equal to ``head_log_probs(...)`` at the targets, but the split and tree heads then never build the
    |V|-wide tensor, and the value is the very one the model's loss (and its perplexity) uses.
    """
    head = model.lm_head
    if isinstance(head, OutputHead):
        return -head.nll(hidden, targets).float()
    return head_log_probs(model, hidden).gather(-1, targets[..., None]).squeeze(-1)


def check_recurrent(model) -> None:
    """Raise ``ValueError`` unless ``model`` carries a recurrent state and has an ``lm_head``.

    The cache needs one state per position computed from the whole stream before it; a feed-forward
    n-gram model (NPLM, LBL) has no state to carry, and its "h_t" would see only n - 1 words.
    """
    name = type(model).__name__
    if not is_stateful(model):
        raise ValueError(
            f"the neural cache needs a recurrent model that carries its state from chunk to chunk (such as "
            f"AWDLSTMForCausalLM); {name} has no recurrent state"
        )
    if not hasattr(model, "lm_head"):
        raise ValueError(f"the neural cache reads p_vocab from the model's lm_head; {name} has none")


@torch.no_grad()
def neural_cache_log_probs(
    model,
    ids: torch.LongTensor,
    start_token_id: int,
    window: int = 500,
    theta: float = 1.0,
    lambda_: float = 0.1,
    bptt: int = 256,
    device: torch.device | str | None = None,
    show_progress: bool = False,
) -> torch.Tensor:
    """log p(w_t) of every token of a stream under the model mixed with its neural cache (eq. 2 + sec. 3).

    Args:
        model: a recurrent causal LM of the package (``AWDLSTMForCausalLM``): ``model.base_model``
            returns ``last_hidden_state`` and a ``RecurrentCache`` in ``cache``.
        ids: the stream of targets, (N,) (as :func:`hf_nlm.data.lm.tokenize_corpus` returns it).
        start_token_id: the token read before the first target (the sentence boundary).
        window, theta, lambda_: the cache size, eq. 2's inverse temperature and the interpolation
            weight (see :func:`evaluate_with_neural_cache`).
        bptt: positions per forward call; the state is carried over, so it changes only speed and
            memory (a (bptt, window + bptt) score matrix per call), not the result.
        device: where to run (default: the model's device).
        show_progress: a progress bar over the chunks.

    Returns:
        (N,) float64 natural-log probabilities on the CPU, in stream order.
    """
    check_recurrent(model)
    check_cache_settings(window, theta, lambda_)
    if isinstance(bptt, bool) or not isinstance(bptt, int) or bptt < 1:
        raise ValueError(f"neural cache: bptt (positions per forward call) must be an integer >= 1, "
                         f"got {bptt!r}")
    ids = torch.as_tensor(ids, dtype=torch.long).flatten()
    if ids.numel() == 0:
        raise ValueError("neural cache: the token stream is empty")
    device = device or next(model.parameters()).device
    columns = stream_columns(ids, 1, start_token_id)  # one column: x_t beside the word it predicts
    body = model.base_model
    cache = NeuralCache(window, theta, lambda_)
    state = None
    out = []
    with eval_mode(model):  # no dropout: h_t must be the deterministic state the cache compares
        chunks = bptt_chunks(columns.length, bptt)
        for start, length in tqdm(chunks, desc="neural cache", disable=not show_progress, leave=False):
            chunk = columns.chunk(start, length)
            x, targets = chunk["input_ids"].to(device), chunk["shift_labels"][0].to(device)
            result = body(x, cache=state, use_cache=True)
            state = result.cache
            if state is None:
                raise ValueError(
                    f"the neural cache needs a recurrent model; {type(model).__name__} returned no state "
                    "to carry"
                )
            hidden = result.last_hidden_state[0]  # (T, D), batch 1
            vocab = head_target_log_probs(model, hidden, targets)
            out.append(cache.log_probs(hidden, targets, vocab).double().cpu())
    return torch.cat(out)


def evaluate_with_neural_cache(
    model,
    dataset,
    tokenizer,
    window: int = 500,
    theta: float = 1.0,
    lambda_: float = 0.1,
    bptt: int = 256,
    text_column: str = "text",
    device: torch.device | str | None = None,
    show_progress: bool = False,
) -> dict[str, float | int]:
    """Perplexity of a recurrent LM with the neural cache pointer (Grave et al. 2017, eq. 2 + sec. 3).

    Every target w_{t+1} of the split is scored with
    p(w) = (1 - lambda) p_vocab(w | h_t) + lambda p_cache(w), where p_cache(w) is proportional to the
    sum, over the previous ``window`` positions i followed by w, of exp(theta * h_t . h_i), and h is
    the last LSTM layer's output (after the model's output dropout, which is off in eval mode). The
    split is one stream (as in :func:`hf_nlm.evaluation.evaluate_lm`), read with batch size 1, the
    state carried from chunk to chunk.

    Args:
        model: a recurrent causal LM (``AWDLSTMForCausalLM``); feed-forward models raise ``ValueError``.
        dataset: one split: a ``datasets.Dataset`` with ``text_column``, or a list of strings.
        tokenizer: the model's tokenizer.
        window: cache size, the number of previous positions (h_i, x_{i+1}) the cache points to (>= 1;
            Grave et al. compare 100 to 2000 on PTB and WikiText-2; the AWD-LSTM reference runs use
            500 on PTB and 3785 on WikiText-2).
        theta: inverse temperature of eq. 2's softmax over the cache (>= 0; tuned on validation).
        lambda_: weight of the cache in the linear interpolation, in [0, 1]; 0 gives the model alone.
        bptt: tokens per forward call; changes only speed and memory, not the result.
        text_column: the text column of a ``datasets.Dataset``.
        device: where to run (default: the model's device).
        show_progress: a progress bar over the chunks.

    Returns:
        The dict of :func:`hf_nlm.evaluation.evaluate_lm` (``perplexity``, ``word_perplexity``,
        ``nll_per_token``, ``bits_per_token``, ``total_nll``, ``num_tokens``, ``num_words``, ``loss``,
        ``num_unk``, same counts) plus the settings ``cache_window``, ``cache_theta``, ``cache_lambda``
        and ``bptt``.
    """
    check_recurrent(model)
    check_cache_settings(window, theta, lambda_)
    texts = split_texts(dataset, text_column)
    ids, num_words = tokenize_corpus(texts, tokenizer)
    log_probs = neural_cache_log_probs(
        model, ids, bos_token_id(tokenizer), window=window, theta=theta, lambda_=lambda_, bptt=bptt,
        device=device, show_progress=show_progress,
    )
    total = -float(log_probs.sum())
    if not math.isfinite(total):
        # Only lambda = 1 can give a word probability 0 (a word absent from the window).
        raise FloatingPointError(
            f"neural cache: total NLL is {total} (window={window}, theta={theta}, lambda={lambda_}); "
            "with lambda = 1 every word missing from the cache window has probability 0"
        )
    stats = stream_stats(ids, num_words, tokenizer)
    report = perplexity_report(total, stats["num_tokens"], stats["num_words"], stats["num_unk"])
    return {**report, "cache_window": window, "cache_theta": float(theta), "cache_lambda": float(lambda_),
            "bptt": bptt}


__all__ = [
    "NeuralCache",
    "check_cache_settings",
    "check_recurrent",
    "evaluate_with_neural_cache",
    "head_log_probs",
    "head_target_log_probs",
    "neural_cache_log_probs",
]
