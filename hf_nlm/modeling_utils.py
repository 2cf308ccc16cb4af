"""Pieces every hf_nlm model shares: the base class, with the output head's construction,
initialisation and loss written once, and the alignment of hidden states with their targets.

A model here is a body (``self.model``: context -> hidden vectors) and a head (``self.lm_head``, an
:class:`~hf_nlm.heads.OutputHead` chosen by ``config.head``). A causal LM's ``__init__`` builds its head
with :meth:`NLMPreTrainedModel._build_head` and its ``forward`` ends with
:meth:`NLMPreTrainedModel.lm_output`, so a new head or a new body needs no edit here.
"""

from __future__ import annotations

import copy
import json
import os
from dataclasses import dataclass

import torch
from safetensors import SafetensorError, safe_open
from torch import nn
from transformers import PreTrainedConfig, PreTrainedModel
from transformers import initialization as init
from transformers.generation import GenerationMode, LogitsProcessor, LogitsProcessorList
from transformers.modeling_outputs import CausalLMOutputWithPast
from transformers.utils import ModelOutput

from .generation import generation_defaults
from .heads import TREE_FIELDS, OutputHead, Targets, build_head
from .saved_files import check_json_files, read_json
from .trees import WordTree


def check_checkpoint_model_type(path: str | os.PathLike, expected: str) -> None:
    """Raise a clear error if the local folder ``path`` holds a checkpoint of another model type.

    transformers only logs a warning in that case and then fills the model with random weights;
    for a user who pointed at the wrong folder that is a silent failure.
    """
    config_file = os.path.join(os.fspath(path), "config.json")
    if not os.path.isfile(config_file):
        return
    found = read_json(config_file).get("model_type")
    if found != expected:
        raise ValueError(
            f"{config_file} is a checkpoint of model_type={found!r}, but a {expected!r} model was asked for; "
            "load it with transformers.AutoModelForCausalLM (or the class of that model type)"
        )


def check_config_field_types(path: str | os.PathLike,
                             config_class: type[PreTrainedConfig] | None = None) -> None:
    """Raise a ``ValueError`` naming ``path``/config.json and the field if a field of ``config_class``'s own
    (those it and its bases up to ``PreTrainedConfig`` declare) holds a value of the wrong type there, e.g.
    ``"hidden_size": "abc"``. An integer is accepted where a float is expected. Without ``config_class``, that
    of the file's ``model_type`` if it is one of this package's (else nothing is checked).

    (Through the Auto classes the config itself refuses the value, :meth:`NLMConfig.field_type_error`;
    this check also names the file, as ``hf-nlm`` reports it.)"""
    config_file = os.path.join(os.fspath(path), "config.json")
    try:
        with open(config_file, encoding="utf-8") as f:
            values = json.load(f)
    except (OSError, json.JSONDecodeError):
        return  # check_checkpoint_model_type / transformers report an unreadable file
    if not isinstance(values, dict):
        raise ValueError(f"{config_file}: expected a JSON object, got {type(values).__name__}")
    if config_class is None:
        from transformers import CONFIG_MAPPING  # every model type registered, ours included

        if values.get("model_type") not in CONFIG_MAPPING:
            return
        config_class = CONFIG_MAPPING[values["model_type"]]
    wrong = config_class.field_type_error(values) if hasattr(config_class, "field_type_error") else None
    if wrong:
        raise ValueError(f"{config_file}: {wrong}")


def _corrupted_weights_message(folder: str | None, name, err: Exception) -> str:
    """What to say when safetensors cannot read a weights file: which file, and how to get it back."""
    where = f"a weights file of {name}"
    if folder is not None:
        bad = []
        for file in sorted(os.listdir(folder)):
            if file.endswith(".safetensors"):
                try:
                    with safe_open(os.path.join(folder, file), framework="pt"):
                        pass
                except Exception:
                    bad.append(os.path.join(folder, file))
        where = " and ".join(bad) or where
    return (
        f"cannot read {where}: the file is truncated or corrupted ({err}). Copy it again from where it came "
        "from: a Hub model downloads again with from_pretrained(..., force_download=True); a training run "
        "also keeps its weights in best_model/ and checkpoints/checkpoint-N/"
    )


def _size_mismatch_message(folder: str, model_class: type, config: PreTrainedConfig | None) -> str | None:
    """Which parameters of the checkpoint in ``folder`` have other shapes than its config.json gives (None
    when every shape matches). Read from the safetensors headers and a model built on the meta device: no
    weights load."""
    config_file = os.path.join(folder, "config.json")
    if not isinstance(config, PreTrainedConfig):
        config = model_class.config_class.from_pretrained(folder)
    with torch.device("meta"):
        expected = {k: tuple(v.shape) for k, v in model_class(config).state_dict().items()}
    found = {}
    for file in sorted(os.listdir(folder)):
        if file.endswith(".safetensors"):
            with safe_open(os.path.join(folder, file), framework="pt") as f:
                found.update({k: tuple(f.get_slice(k).get_shape()) for k in f.keys()})
    wrong = [f"{k}: {found[k]} in the weights, {expected[k]} from the config"
             for k in expected if k in found and found[k] != expected[k]]
    if not wrong:
        return None
    return (
        f"{config_file} does not match the weights saved with it: {'; '.join(wrong)}. "
        "Its sizes (e.g. vocab_size, hidden_size) were edited or it comes from another model: restore the "
        "config.json saved with these weights"
    )


#: The JSON files of a saved model folder, read (and their damage named) before transformers reads them.
SAVED_JSON_FILES = ("config.json", "generation_config.json")

#: Weights files that unpickle (torch.load): hf_nlm reads model.safetensors only.
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl")


def check_safetensors_only(folder: str) -> None:
    """Raise ``OSError`` naming the file if ``folder`` holds weights only as a pickle
    (``pytorch_model.bin``...)."""
    files = sorted(os.listdir(folder))
    if any(f.endswith(".safetensors") or f.endswith(".safetensors.index.json") for f in files):
        return
    pickles = [os.path.join(folder, f) for f in files if f.endswith(PICKLE_SUFFIXES)]
    if pickles:
        raise OSError(
            f"{pickles[0]}: hf_nlm loads weights from model.safetensors only, and {folder} has none. A "
            "pickle file can run code when it is read, so it is not opened here; if you trust it, convert "
            "it: model.load_state_dict(torch.load(path, weights_only=True)) on a model built from the "
            "config, then model.save_pretrained(folder)"
        )


def _weights_file(folder: str | None, name, key: str | None = None) -> str:
    """The weights file of ``folder`` that holds ``key`` (any of its files without a key), else what
    ``name`` says (a Hub id; no name: the ``state_dict`` given to ``from_pretrained``)."""
    if folder is None:
        return "the state_dict given" if name is None else f"the weights of {name}"
    files = [f for f in sorted(os.listdir(folder)) if f.endswith(".safetensors")]
    for file in files if key is not None else []:
        try:
            with safe_open(os.path.join(folder, file), framework="pt") as f:
                if key in f.keys():
                    return os.path.join(folder, file)
        except Exception:  # noqa: BLE001 - an unreadable file holds no key we can name
            continue
    return os.path.join(folder, files[0]) if files else folder


def _load_problems(info: dict, allowed_missing=(), ignore_unexpected=()) -> str | None:
    """The missing and unexpected keys of a load (``output_loading_info``'s dict), as a sentence, or None;
    missing keys ending with ``allowed_missing`` and unexpected keys starting with ``ignore_unexpected``
    pass."""
    missing = sorted(k for k in info.get("missing_keys", ()) if not k.endswith(tuple(allowed_missing)))
    unexpected = sorted(k for k in info.get("unexpected_keys", ())
                        if not k.startswith(tuple(ignore_unexpected)))
    parts = [f"{what} {', '.join(keys[:8])}{' ...' if len(keys) > 8 else ''} ({len(keys)})"
             for what, keys in (("missing", missing), ("unexpected", unexpected)) if keys]
    return "; ".join(parts) or None


def check_loading_info(model: nn.Module, loading_info: dict, path: str | os.PathLike,
                       tree_given: bool = False) -> None:
    """Raise ``ValueError`` naming the weights file of ``path`` and the keys if a load (``from_pretrained``'s
    ``output_loading_info=True`` dict, ``loading_info``, that gave ``model``) left a tensor of the model
    initialised because the checkpoint lacks it, or found a checkpoint tensor the model has no place for.

    ``from_pretrained`` itself does what transformers does (initialises what is missing, ignores what is
    unexpected, logs both); the loaders of a user's run folder (:func:`hf_nlm.training.load_run` and the
    ``hf-nlm`` commands and the page that go through it, a training run's resume) call this, so that a folder
    saved incompletely or holding another model's weights is refused, never used with random weights. A tree
    given as ``tree=`` (``tree_given``) fills the tree buffers the checkpoint lacks; a body loaded from its
    LM's checkpoint leaves the head's weights unused, as in transformers."""
    problems = _load_problems(
        loading_info, (".tree_nodes", ".tree_bits", ".tree_mask") if tree_given else (),
        ignore_unexpected=("lm_head.",) if getattr(model, "lm_head", None) is None else (),
    )
    if problems:
        folder = os.fspath(path) if os.path.isdir(path) else None
        raise ValueError(
            f"{_weights_file(folder, path)} does not hold the weights of this {type(model).__name__}: "
            f"{problems}. It comes from another model (or was saved incompletely): restore the weights saved "
            "with its config.json"
        )


def from_pretrained_complete(model_class: type, path: str | os.PathLike, **kwargs) -> PreTrainedModel:
    """``model_class.from_pretrained(path, **kwargs)`` (a model class of this package or a transformers Auto
    class), refusing a checkpoint that does not hold exactly the model's weights: :func:`check_loading_info`.
    What the library's loaders of a user's folder use; ``from_pretrained`` alone loads what matches and
    initialises the rest, as transformers does."""
    model, info = model_class.from_pretrained(path, output_loading_info=True, **kwargs)
    check_loading_info(model, info, path, tree_given=kwargs.get("tree") is not None)
    return model


def _follow_umask(folder: str | os.PathLike) -> None:
    """Give the weight files ``save_pretrained`` wrote into ``folder`` the permissions of its ``config.json``
    (those of the umask): safetensors writes through a private temp file, so they would otherwise be 0600."""
    config = os.path.join(os.fspath(folder), "config.json")
    if not os.path.isfile(config):
        return
    mode = os.stat(config).st_mode & 0o777
    for name in os.listdir(folder):
        path = os.path.join(os.fspath(folder), name)
        if name.endswith((".safetensors", ".safetensors.index.json", ".bin")) and os.path.isfile(path):
            if os.stat(path).st_mode & 0o777 != mode:
                os.chmod(path, mode)


def check_finite_weights(model: nn.Module, where) -> None:
    """Raise ``ValueError`` naming the tensor and ``where`` it came from (a callable: key -> file) if a
    floating-point parameter or buffer of ``model`` holds NaN or inf."""
    for key, tensor in model.state_dict().items():
        if (tensor.is_floating_point() and tensor.device.type != "meta"
                and not bool(torch.isfinite(tensor).all())):
            bad = int((~torch.isfinite(tensor)).sum())
            raise ValueError(
                f"{where(key)}: tensor {key} holds {bad} NaN or infinite value(s) of {tensor.numel()}: these "
                "weights give no usable probabilities (training diverged, or the file was damaged). Load an "
                "earlier checkpoint (a training run keeps best_model/ and checkpoints/checkpoint-N/)"
            )


@dataclass
class NLMCausalLMOutput(CausalLMOutputWithPast):
    """``CausalLMOutputWithPast`` plus ``nll``: the mean negative log-likelihood of the targets, which
    is ``loss`` unless the model adds regularisation terms to its training loss (use it for perplexity)."""

    nll: torch.FloatTensor | None = None


#: The decoding modes that score drafted tokens and then cut the cache back to the accepted ones, with how a
#: caller asks for each. No model here has such a cache (a recurrent state cannot be cut back; a window
#: model keeps none), so ``generate()`` refuses them.
ROLLBACK_MODES = {
    GenerationMode.ASSISTED_GENERATION:
        "assistant_model=, prompt_lookup_num_tokens= or assistant_early_exit=",
    GenerationMode.CONTRASTIVE_SEARCH: "penalty_alpha= with top_k=",
}


#: The fields that set how long a continuation is, as ``generate()`` takes them.
LENGTH_FIELDS = ("max_length", "max_new_tokens", "min_length", "min_new_tokens")


class NLMPreTrainedModel(PreTrainedModel):
    """Base class of the hf_nlm models.

    Refuses checkpoints of another model type; builds, initialises and scores through the output head
    (:meth:`_build_head`, :meth:`_init_weights`, :meth:`lm_output`); refuses to save an inconsistent config.
    """

    # Every model here keeps its body in ``self.model`` (``model.`` prefixes the task model's weights).
    base_model_prefix = "model"
    # Our forward() computes the mean loss itself; Trainer must not rescale it under DDP.
    accepts_loss_kwargs = False
    # True inside generate() after the prompt is checked: forward() then skips check_inputs.
    _generating = False
    #: Does the model carry a recurrent state (an LSTM's (h, c)) from one token to the next? Such a state
    #: summarises the whole prefix and cannot be cut back to a shorter one (``generate()`` says so when it
    #: refuses the :data:`ROLLBACK_MODES`), and evaluation streams the text as columns with the state carried
    #: over (``hf_nlm.data.batching``).
    is_stateful: bool = False
    #: The length fields (``max_length``, ``max_new_tokens``, ``min_length``, ``min_new_tokens``) the running
    #: ``generate()`` call gives itself, as opposed to those it takes from ``generation_config``.
    _lengths_asked: frozenset = frozenset()

    def __init__(self, config, *inputs, **kwargs):
        """transformers' ``PreTrainedModel.__init__``, which makes the model's ``generation_config`` from its
        config (``GenerationConfig.from_model_config``); then the package's generation settings, read from the
        same config (:func:`hf_nlm.generation.generation_defaults`), so that every model of this package,
        however it is built (``train(spec)``, ``AutoModelForCausalLM.from_config``, the class itself) and
        trained (``Trainer`` included), saves them with ``save_pretrained``."""
        super().__init__(config, *inputs, **kwargs)
        if self.can_generate():
            self.generation_config.update(**generation_defaults(self.config))
            # Recorded as unchanged since it was made, as transformers records a config it makes or loads:
            # save_pretrained then validates it as transformers' own defaults (a warning, not a refusal).
            self.generation_config._original_object_hash = hash(self.generation_config)

    # ------------------------------------------------------------------ the output head
    def _build_head(self, in_features: int, **head_kwargs) -> OutputHead:
        """The head ``config.head`` names over vectors of size ``in_features`` (``head_kwargs``: what the
        model's constructor was given for its head, e.g. ``tree=`` for a tree head, or what a run's
        :meth:`~hf_nlm.heads.OutputHead.prepare_run` returned). What the head needs saved to be rebuilt (a
        tree's shape) goes into the config, so that ``from_pretrained`` can build it empty before the weights
        load."""
        head = build_head(self.config, in_features, **head_kwargs)
        for name, value in head.config_values().items():
            setattr(self.config, name, value)
        return head

    def set_tree(self, tree: WordTree) -> None:
        """Replace the tree head by a fresh one over ``tree`` (new node vectors q_i, initialised as at
        construction; the body is kept). The config's tree shape fields follow the new tree, so
        ``save_pretrained`` / ``from_pretrained`` keep it. (Mnih & Hinton's (2008) recipe retrains a
        fresh model on the new tree instead: :func:`hf_nlm.training.train` with ``tree_mode``.)"""
        if self.config.head != "tree":
            raise ValueError(
                f"set_tree needs a model with head='tree'; this one has head={self.config.head!r}"
            )
        old = self.lm_head
        ref = next(old.parameters())
        for name in TREE_FIELDS:  # the new tree may have another shape than the old one
            setattr(self.config, name, None)
        head = self._build_head(old.in_features, tree=tree)
        head.init_weights(self.config.initializer_range)
        self.lm_head = head.to(device=ref.device, dtype=ref.dtype)

    @torch.no_grad()
    def _init_weights(self, module: nn.Module) -> None:
        """Uniform(+-initializer_range) for word embeddings and heads (biases 0); a model's own
        ``_init_weights`` adds its body's modules. ``transformers.initialization`` skips tensors
        already loaded from a checkpoint."""
        r = self.config.initializer_range
        if isinstance(module, OutputHead):
            module.init_weights(r, init=init)
        elif isinstance(module, nn.Embedding):
            init.uniform_(module.weight, -r, r)

    def _initialize_weights(self, module: nn.Module, is_custom_code: bool = False) -> None:
        # transformers skips a module of custom code whose own tensors (recurse=False) all loaded. A head
        # initialises its sub-modules too (a digit-RNN, a mixture of Gaussians: modules with no tensors of
        # their own, which would be skipped as well), so it runs while any tensor below it did not load.
        # (Through transformers' own method, which is where its tests seed each module's initialisation.)
        if isinstance(module, OutputHead) and not all(
            getattr(t, "_is_hf_initialized", False) for t in [*module.parameters(), *module.buffers()]
        ):
            is_custom_code = False
        super()._initialize_weights(module, is_custom_code)

    def lm_output(
        self,
        hidden: torch.Tensor,
        labels: torch.LongTensor | None = None,
        logits_to_keep: int | torch.Tensor = 0,
        return_dict: bool | None = None,
        *,
        output_class: type[NLMCausalLMOutput] = NLMCausalLMOutput,
        regularization: dict[str, torch.Tensor | None] | None = None,
        outputs: dict | None = None,
        **kwargs,
    ):
        """Loss and logits from the body's ``hidden`` (B, T, D): how every causal LM's forward ends.

        The loss is the mean NLL of the targets (``labels`` shifted inside, or the already aligned
        ``shift_labels`` in ``kwargs``; -100 ignored) through the head's ``nll``, so a tree head touches only
        the targets' paths; the per-target tensors the head names in ``target_fields`` are taken from
        ``kwargs`` and aligned the same way. ``regularization`` terms (AWD-LSTM's AR / TAR) are added to
        ``loss`` and reported by name, and in training mode :meth:`target_loss_weights` may weigh the targets
        in it; ``nll`` stays the plain mean NLL. In training mode with targets the |V|-wide logits are not
        built (``logits=None``); otherwise only the positions ``logits_to_keep`` names are scored
        (:func:`positions_to_score`: the last N, all for 0, or a 1-D tensor of positions; an empty one scores
        none, for a caller that reads only the loss). ``outputs`` are further fields of ``output_class`` (e.g.
        ``cache``). ``return_dict=False`` (or ``config.return_dict`` False) gives a tuple.
        """
        nll = None
        shift_labels = kwargs.get("shift_labels")
        if labels is not None or shift_labels is not None:
            fields = {name: kwargs[name] for name in self.lm_head.target_fields
                      if kwargs.get(name) is not None}
            h_sel, targets = align_targets(hidden, labels, shift_labels, fields)
            if targets.ids.numel() == 0:
                raise ValueError("labels hold no target: every label after the shift is -100")
            token_nll = self.lm_head.nll(h_sel, targets)
            nll = token_nll.mean()
            weights = self.target_loss_weights(targets.ids) if self.training else None
            objective = nll if weights is None else (weights * token_nll).sum() / weights.sum()
        regularization = {k: v for k, v in (regularization or {}).items() if v is not None}
        loss = nll if nll is None else objective + sum(regularization.values())

        logits = None
        if loss is None or not self.training:
            # generate() asks only for the last position(s): never score positions it will not read.
            logits = self.lm_head(positions_to_score(hidden, logits_to_keep))
        output = output_class(loss=loss, logits=logits, nll=nll, **regularization, **(outputs or {}))
        return self._output(output, return_dict)

    def target_loss_weights(self, target_ids: torch.Tensor) -> torch.Tensor | None:
        """Weights w_t of the targets ``target_ids`` in the training loss, sum_t w_t NLL_t / sum_t w_t, or
        None for the plain mean (every model but one with a numeral loss weight,
        ``NumeracyLMConfig.numeral_loss_weight``)."""
        return None

    def check_inputs(
        self, input_ids: torch.Tensor | None, labels: torch.Tensor | None = None,
        shift_labels: torch.Tensor | None = None, attention_mask: torch.Tensor | None = None,
    ) -> None:
        """Raise ``ValueError`` if ``input_ids`` hold an id outside ``[0, vocab_size)`` or ``labels`` /
        ``shift_labels`` do not have the shape of ``input_ids`` or hold such an id (-100 aside): how every
        model's ``forward`` starts, so that a wrong id is named, not an ``IndexError`` from the embedding.
        In training mode it also refuses ``labels`` that drop the sentence ends (:func:`drops_sentence_ends`:
        what ``DataCollatorForLanguageModeling(mlm=False)`` gives when the pad token is ``<eos>``)."""
        if input_ids is None or input_ids.device.type == "meta" or _tracing():
            return  # min / max read the values: a traced or exported graph has none to read
        if self._generating and labels is None and shift_labels is None:
            return  # generate() checked the prompt; every token it appends is an argmax / draw of our scores
        V = self.config.vocab_size
        given = [(name, ids) for name, ids in (("input_ids", input_ids), ("labels", labels),
                                               ("shift_labels", shift_labels))
                 if ids is not None]
        for name, ids in given:
            if ids.shape != input_ids.shape:
                raise ValueError(
                    f"{name} has shape {tuple(ids.shape)} but input_ids {tuple(input_ids.shape)}: {name} "
                    "give the target of each position of input_ids (-100 for none)"
                )
        # One device-to-host read per forward (this runs at every training step and every generated token);
        # the ids are looked at one by one only when something is wrong.
        outside = [((ids < 0) & (ids != -100)) | (ids >= V) if name != "input_ids" else (ids < 0) | (ids >= V)
                   for name, ids in given]
        checks = [o.any() for o in outside]
        eos, pad = self.config.eos_token_id, self.config.pad_token_id
        pad_is_eos = pad is not None and pad in (eos if isinstance(eos, list) else [eos])
        if self.training and labels is not None and shift_labels is None and pad_is_eos:
            checks.append(drops_sentence_ends(input_ids, labels, attention_mask, pad).any())
        if not bool(torch.stack(checks).any()):
            return
        for (name, ids), wrong in zip(given, outside, strict=True):
            if bool(wrong.any()):
                lo, hi = torch.aminmax(ids[ids != -100] if name != "input_ids" else ids)
                raise ValueError(
                    f"{name} hold ids from {int(lo)} to {int(hi)}, outside the model's vocabulary "
                    f"[0, vocab_size={V}): encode the text with the tokenizer saved with the model"
                )
        raise ValueError(
            f"labels drop the sentence ends: every <eos> (id {pad}, also the pad token) among a row's "
            "targets has label -100 while the other tokens are targets. transformers' "
            "DataCollatorForLanguageModeling(tokenizer, mlm=False) does this with hf_nlm's tokenizers (it "
            "masks every label equal to pad_token_id), so the model would never learn where a sentence "
            "ends. Collate with hf_nlm.data.DataCollatorForCausalLM(tokenizer), which pads by length and "
            "keeps every <eos> a target; to leave the sentence ends out of the targets on purpose, pass "
            "shift_labels"
        )

    def _hidden_states(self, output_hidden_states: bool | None) -> bool:
        """Whether to return every layer's hidden states (the argument if given, else the config's)."""
        return (output_hidden_states if output_hidden_states is not None
                else bool(self.config.output_hidden_states))

    def _output(self, output: ModelOutput, return_dict: bool | None):
        """``output``, or its tuple when ``return_dict`` (if given, else the config's) is False."""
        return (output if (return_dict if return_dict is not None else self.config.return_dict)
                else output.to_tuple())

    # ------------------------------------------------------------------ loading and saving

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path, *model_args, **kwargs):
        """``transformers``' ``from_pretrained``; a local folder that cannot load gives an error naming the
        file and what was expected (a truncated or damaged ``config.json`` or ``generation_config.json``, or
        one holding NaN: :func:`hf_nlm.saved_files.read_json`; :func:`check_checkpoint_model_type`,
        :func:`check_config_field_types`, a truncated or corrupted weights file, config sizes that do not
        match the weights, weights saved only as a pickle: :func:`check_safetensors_only`), and every load
        checks that the weights are finite (:func:`check_finite_weights`).

        A checkpoint that lacks some of the model's tensors loads as in transformers: those are initialised
        (``_init_weights``), those it holds beyond the model's are ignored, and transformers' load report
        lists both; ``output_loading_info=True`` returns them too, as ``(model, loading_info)``. The loaders
        of a user's run folder refuse such a checkpoint instead (:func:`from_pretrained_complete`)."""
        folder = None
        if pretrained_model_name_or_path is not None and os.path.isdir(pretrained_model_name_or_path):
            folder = os.fspath(pretrained_model_name_or_path)
            # transformers would name no file for a damaged config.json, and skip a damaged
            # generation_config.json silently (the saved search and its suppressed tokens lost).
            check_json_files(folder, SAVED_JSON_FILES)
            check_checkpoint_model_type(folder, cls.config_class.model_type)
            if not isinstance(kwargs.get("config"), PreTrainedConfig):
                check_config_field_types(folder, cls.config_class)
            if not kwargs.get("ignore_mismatched_sizes"):
                # Checked before transformers loads anything: it would print its load report and raise a
                # generic error; this names the parameters and the file to fix.
                try:
                    message = _size_mismatch_message(folder, cls, kwargs.get("config"))
                except Exception:  # an unreadable config or weights file: transformers' load reports it below
                    message = None
                if message:
                    raise ValueError(message)
            if kwargs.get("use_safetensors") is not False:
                check_safetensors_only(folder)
        try:
            loaded = super().from_pretrained(pretrained_model_name_or_path, *model_args, **kwargs)
        except SafetensorError as err:
            raise OSError(_corrupted_weights_message(folder, pretrained_model_name_or_path, err)) from None
        model = loaded[0] if kwargs.get("output_loading_info") else loaded
        if (folder is not None and model.can_generate() and kwargs.get("generation_config") is None
                and not os.path.isfile(os.path.join(folder, "generation_config.json"))):
            # transformers then makes the generation config from config.json alone, without the settings
            # __init__ gave the model; a saved generation_config.json is kept as it is.
            model.generation_config.update(**generation_defaults(model.config))
        check_finite_weights(model, lambda key: _weights_file(folder, pretrained_model_name_or_path, key))
        head = getattr(model, "lm_head", None)
        if isinstance(head, OutputHead):
            head.warm_cache()  # e.g. a loaded tree's tables, so that torch.export can trace the model at once
        return loaded

    def save_pretrained(self, save_directory, *args, model_card: bool = True, **kwargs):
        """``transformers``' ``save_pretrained`` (same arguments), refusing a model that would not load back,
        and writing a model card (``README.md`` with the Hub metadata) where the folder has none;
        ``model_card=False`` for a caller that writes its own (a training run's card, with its results)."""
        # Before anything is written: a config that would not load back, or that describes another head
        # than the model has, is refused with the field named.
        self.config.check_savable(save_directory)
        head = getattr(self, "lm_head", None)
        if isinstance(head, OutputHead):
            described = {"head": head.head_name, **head.config_values()}
            wrong = {k: v for k, v in described.items() if getattr(self.config, k) != v}
            if wrong:
                said = {k: getattr(self.config, k) for k in wrong}
                raise ValueError(
                    f"not saving {type(self).__name__} to {save_directory}: it would not load back. Its "
                    f"config says {said} but its head ({type(head).__name__}) has {wrong}"
                )
        saved = super().save_pretrained(save_directory, *args, **kwargs)
        _follow_umask(save_directory)
        # A model card (README.md) with the Hub metadata, unless the folder has one (a run's richer card).
        card = os.path.join(os.fspath(save_directory), "README.md")
        if model_card and not os.path.exists(card) and kwargs.get("is_main_process", True):
            from .hub.model_card import write_model_card

            write_model_card(save_directory, self.config, num_parameters=self.num_parameters())
        return saved

    @classmethod
    def register_for_auto_class(cls, auto_class="AutoModel"):
        """Nothing: the config's ``save_pretrained`` writes this package's auto_map
        (:mod:`hf_nlm.remote_code`). transformers calls this on a class it loaded as remote code; its own
        version would make every later save copy the defining module, whose relative imports of the rest of
        the package do not load from a model folder."""

    def push_to_hub(self, repo_id: str, **kwargs):
        """``transformers``' ``push_to_hub`` (same arguments), uploading this package's model card, not a
        generic one: :func:`hf_nlm.hub.push_model`. A card already in the repo is kept."""
        from .hub.push import push_model

        return push_model(self, repo_id, **kwargs)

    def get_output_embeddings(self):
        # Our heads are not nn.Linear (and NPLM's [U W] is not an embedding matrix): transformers must not
        # resize or tie them as one. Ties are declared by _tied_weights_keys; resize_token_embeddings below
        # resizes the heads itself.
        return None

    def resize_token_embeddings(
        self, new_num_tokens: int | None = None, pad_to_multiple_of: int | None = None,
        mean_resizing: bool = True,
    ):
        """transformers' ``resize_token_embeddings`` (the input embedding), then the output head.

        New tokens are words added at the end of the vocabulary (a smaller vocabulary cuts the last ids).
        The softmax and split heads add their output rows, the mean of the old ones with ``mean_resizing``
        (J. Hewitt, "Initializing new word embeddings for pretrained language models", 2021; zeros
        otherwise), so that the old tokens' probabilities change only by the new normalisation; a tied
        head stays tied; a split head cut past a cut-off drops the clusters left empty. A tree head gives
        each new word a leaf and removes the leaves of cut words
        (:meth:`~hf_nlm.heads.TreeSoftmaxHead.resize`). The numeral heads of the numeracy LM do as the
        softmax in their word part (the word branch of a hierarchical softmax); their numerals keep their
        ids and probabilities, and a numeral cut with its id leaves ``numeral_vocab``. What describes the
        head in the config (a tree's shape, the cut-offs, the numerals) follows, so that ``save_pretrained``
        / ``from_pretrained`` give the resized model back. A head that cannot follow refuses before anything
        is resized, saying what to do instead (:meth:`~hf_nlm.heads.OutputHead.check_resize`).
        """
        head = getattr(self, "lm_head", None)
        resizing = new_num_tokens is not None or pad_to_multiple_of is not None
        if resizing:
            size = self.get_input_embeddings().weight.shape[0] if new_num_tokens is None else new_num_tokens
            if isinstance(pad_to_multiple_of, int):
                size = -(-size // pad_to_multiple_of) * pad_to_multiple_of  # transformers' rounding up
            self.check_resize(size)
        embeddings = super().resize_token_embeddings(new_num_tokens, pad_to_multiple_of, mean_resizing)
        if resizing:
            self.config.tokenizer_fingerprint = None  # another vocabulary now: check_tokenizer compares sizes
            # A cut vocabulary loses the ids of the generation settings past its end, as its config does.
            kept = [i for i in self.config.first_step_suppressed_ids or [] if i < size]
            self.config.first_step_suppressed_ids = kept or None
            if self.config.unk_token_id is not None and self.config.unk_token_id >= size:
                self.config.unk_token_id = None
            if self.can_generate():  # and so do the token lists of the generation config
                for name in ("begin_suppress_tokens", "suppress_tokens"):
                    ids = getattr(self.generation_config, name)
                    if ids is not None:
                        setattr(self.generation_config, name, [i for i in ids if i < size] or None)
        if resizing and head is not None:
            # A tied head weight is already the new embedding (super() re-tied it); resize() keeps it.
            head.resize(embeddings.num_embeddings, mean_init=mean_resizing)
            for name, value in head.config_values().items():
                setattr(self.config, name, value)
        return embeddings

    def check_resize(self, vocab_size: int) -> None:
        """Raise ``ValueError``, saying what to do instead, if the model cannot follow a vocabulary resized
        to ``vocab_size`` tokens (its head's :meth:`~hf_nlm.heads.OutputHead.check_resize`)."""
        head = getattr(self, "lm_head", None)
        if isinstance(head, OutputHead):
            head.check_resize(vocab_size)

    def generate(self, *args, **kwargs):
        """``transformers``' ``generate()``, with the counts of the resolved settings checked first
        (:func:`check_generation_counts`, the saved ones included): a ``num_beams`` of 0 or -3 would otherwise
        fail deep inside beam search.

        An empty prompt (``input_ids`` of shape (B, 0)) starts from the sentence boundary: it becomes one
        column of ``bos_token_id``, which the returned sequences then begin with (as ``hf-nlm generate``
        does for an empty prompt).

        The prompt's ids are checked once (:meth:`check_inputs`); the steps that follow read only tokens
        generate() chose from the model's own scores, so ``forward`` does not check them again.

        The modes of :data:`ROLLBACK_MODES` are refused with a ``ValueError`` naming the mode, before
        transformers starts: they need a cache that can be cut back, and a recurrent state
        (:attr:`is_stateful`) cannot be, while the window models keep no cache at all.

        A length the call gives decides the length (:meth:`_prepare_generated_length`): ``max_length=L``
        (as lm-evaluation-harness passes, prompt + ``max_gen_toks``) stops at L tokens in all, although the
        saved ``max_new_tokens`` would win in transformers' own precedence; ``max_new_tokens=N`` gives N; and
        a saved ``min_new_tokens`` is cut to the new tokens the call's maximum leaves."""
        key = "input_ids" if "input_ids" in kwargs else "inputs" if "inputs" in kwargs else None
        ids = kwargs[key] if key else (args[0] if args else None)
        if isinstance(ids, torch.Tensor) and ids.dim() == 2 and ids.shape[1] == 0:
            bos = self.generation_config.bos_token_id
            bos = self.config.bos_token_id if bos is None else bos
            if bos is None:
                raise ValueError(
                    "generate(): an empty prompt needs a bos_token_id to start from (none is configured)"
                )
            ids = torch.full((ids.shape[0], 1), bos, dtype=torch.long, device=ids.device)
            if key:
                kwargs[key] = ids
            else:
                args = (ids, *args[1:])
            mask = kwargs.get("attention_mask")
            if mask is None or mask.shape[-1] == 0:
                kwargs["attention_mask"] = torch.ones_like(ids)
        for given in (ids, kwargs.get("decoder_input_ids")):
            if isinstance(given, torch.Tensor) and given.dtype in (torch.long, torch.int):
                self.check_inputs(given)
        passed = kwargs.get("generation_config", args[1] if len(args) > 1 else None)
        config = self._resolved_generation_config(kwargs, passed)
        check_generation_counts(config, kwargs, passed)
        mode = config.get_generation_mode(kwargs.get("assistant_model"))
        if mode in ROLLBACK_MODES:
            kept = ("carries a recurrent state, which cannot be rolled back to a shorter prefix"
                    if self.is_stateful else "keeps no cache: each step reads its window of last words again")
            raise ValueError(
                f"generate(): {mode.value} ({ROLLBACK_MODES[mode]}) scores drafted tokens and then rolls a "
                f"cache back to the accepted ones, but {type(self).__name__} {kept}; use greedy search, "
                "sampling or beam search"
            )
        # Last in the list (transformers puts a caller's processors after its own): it sees the final scores.
        kwargs["logits_processor"] = LogitsProcessorList([*(kwargs.get("logits_processor") or []),
                                                          NoTokenLeftCheck(config)])
        self._generating = True
        self._lengths_asked = frozenset(
            name for name in LENGTH_FIELDS
            if kwargs.get(name) is not None or getattr(passed, name, None) is not None
        )
        try:
            return super().generate(*args, **kwargs)
        finally:
            self._generating = False
            self._lengths_asked = frozenset()

    def _prepare_generated_length(self, generation_config, has_default_max_length, has_default_min_length,
                                  model_input_name, input_ids_length, inputs_tensor):
        """transformers' step that turns the length fields into ``max_length`` / ``min_length`` for this
        prompt, with the call's own lengths put first (:meth:`generate` records which the call gives).

        transformers lets a ``max_new_tokens`` win over a ``max_length`` wherever each comes from, so the
        saved default of 20 new tokens would override a caller's ``max_length`` (lm-evaluation-harness asks
        for prompt + ``max_gen_toks`` tokens and got 20 new ones whatever it asked). Here a ``max_length``
        (``min_length``) the call gives without ``max_new_tokens`` (``min_new_tokens``) sets aside the saved
        count of new tokens. Then a ``min_new_tokens`` the call did not give is cut to the new tokens its
        maximum leaves: the maximum stops generation either way, and the longer minimum would only make
        transformers warn that the lengths cannot both be met."""
        asked = self._lengths_asked
        if "max_length" in asked and "max_new_tokens" not in asked:
            generation_config.max_new_tokens = None
        if "min_length" in asked and "min_new_tokens" not in asked:
            generation_config.min_new_tokens = None
        generation_config = super()._prepare_generated_length(
            generation_config=generation_config, has_default_max_length=has_default_max_length,
            has_default_min_length=has_default_min_length, model_input_name=model_input_name,
            input_ids_length=input_ids_length, inputs_tensor=inputs_tensor,
        )
        room = generation_config.max_length - input_ids_length
        if (not asked & {"min_length", "min_new_tokens"} and generation_config.min_new_tokens is not None
                and generation_config.min_new_tokens > room >= 0):
            generation_config.min_new_tokens = room
            generation_config.min_length = input_ids_length + room
        return generation_config

    def _resolved_generation_config(self, kwargs: dict, passed=None):
        """The settings ``generate(**kwargs)`` runs with, as transformers resolves them: the generation
        config (the saved one, or the one the call passes) updated by the keyword arguments."""
        config = copy.copy(passed or self.generation_config)
        for name, value in kwargs.items():
            if hasattr(config, name):  # set, not update(): transformers validates the values itself
                setattr(config, name, value)
        return config


#: The generation settings that count something, and the least each may be: transformers takes a saved
#: ``num_beams`` of -3 and fails deep inside beam search.
GENERATION_COUNTS = {"num_beams": 1, "num_return_sequences": 1, "num_beam_groups": 1, "max_new_tokens": 1,
                     "max_length": 1, "min_new_tokens": 0, "min_length": 0, "no_repeat_ngram_size": 0,
                     "top_k": 0}


class NoTokenLeftCheck(LogitsProcessor):
    """Raises when the settings leave a row no token to write: every score -inf. transformers would then pick
    an arbitrary token, a suppressed ``<unk>`` included (``no_repeat_ngram_size=1`` with a ``min_new_tokens``
    beyond the words a vocabulary has writes ``<unk>`` over and over); the error names the settings that rule
    tokens out and the step."""

    def __init__(self, config) -> None:
        self.settings = {name: getattr(config, name, None) for name in (
            "no_repeat_ngram_size", "min_new_tokens", "min_length", "bad_words_ids", "suppress_tokens",
            "begin_suppress_tokens", "repetition_penalty")}
        self.start = None

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        if self.start is None:
            self.start = input_ids.shape[-1]
        if torch.isneginf(scores).all(dim=-1).any():
            unset = {"repetition_penalty": 1.0}
            given = ", ".join(f"{k}={v!r}" for k, v in self.settings.items()
                              if v not in (None, 0, []) and v != unset.get(k))
            step = input_ids.shape[-1] - self.start + 1
            raise ValueError(
                f"generate(): at new token {step} the settings rule out every token of the vocabulary "
                f"({given}): lower min_new_tokens, raise no_repeat_ngram_size, or suppress fewer tokens")
        return scores


def generation_count_problem(config) -> tuple[str, object, int] | None:
    """The first setting of :data:`GENERATION_COUNTS` in the generation ``config`` that is not a whole number
    at least its least, as (name, value, least); None when all are (or unset: None sets no limit)."""
    for name, least in GENERATION_COUNTS.items():
        value = getattr(config, name, None)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < least):
            return name, value, least
    return None


def check_generation_counts(config, kwargs: dict, passed=None) -> None:
    """A ``ValueError`` naming the :func:`generation_count_problem` of the resolved generation ``config``
    and where the value came from: the call's keyword, the generation config the call passes, or the
    model's own (``generation_config.json`` of a saved model)."""
    problem = generation_count_problem(config)
    if problem is not None:
        name, value, least = problem
        source = ("" if name in kwargs else " (in the generation_config passed)" if passed is not None
                  else " (in the model's generation_config: generation_config.json of a saved model)")
        raise ValueError(f"generate(): {name} must be an integer >= {least}, got {value!r}{source}")


def positions_to_score(hidden: torch.Tensor, logits_to_keep: int | torch.Tensor) -> torch.Tensor:
    """The positions of ``hidden`` (B, T, D) whose logits a forward returns, as transformers reads
    ``logits_to_keep``: an int keeps the last that many (0: all), a 1-D tensor the positions it lists."""
    if isinstance(logits_to_keep, int):
        return hidden[:, -logits_to_keep:] if logits_to_keep else hidden
    return hidden[:, logits_to_keep.to(hidden.device)]


def drops_sentence_ends(
    input_ids: torch.Tensor, labels: torch.Tensor, attention_mask: torch.Tensor | None, eos_id: int
) -> torch.Tensor:
    """Per row (B,), whether ``labels`` look like ``DataCollatorForLanguageModeling(mlm=False)``'s when the
    pad token is ``<eos>`` (``eos_id``): it sets the label of every ``<eos>`` to -100, sentence ends included.

    A row is flagged when, within its targets' span, the positions without a target are all ``<eos>``
    and there is at least one. The span runs from the row's first target (position 0 is never one) to its
    last attended token (``attention_mask`` 1), or without a mask to its last target: a masked prefix (a
    prompt, the context of a block) lies before the span and right padding after it, so neither is
    flagged; nor is a row that also masks other tokens inside the span (e.g. the user turns of a dialogue).
    """
    ids, targets = input_ids[:, 1:], labels[:, 1:]
    real = targets != -100
    if attention_mask is None or attention_mask.shape != input_ids.shape:
        attended = torch.ones_like(real)
        end = real
    else:
        attended = attention_mask[:, 1:].bool()
        end = attended
    in_span = (real.cumsum(1) > 0) & (end.flip(1).cumsum(1).flip(1) > 0)
    untargeted = in_span & attended & ~real
    is_eos = ids == eos_id
    return (untargeted & is_eos).any(1) & ~(untargeted & ~is_eos).any(1)


def _tracing() -> bool:
    """Whether torch.compile / torch.export / torch.jit is tracing: no concrete values to check then."""
    exporting = getattr(torch.compiler, "is_exporting", lambda: False)
    return torch.compiler.is_compiling() or exporting() or torch.jit.is_tracing()


def align_targets(
    hidden: torch.Tensor,
    labels: torch.Tensor | None = None,
    shift_labels: torch.Tensor | None = None,
    fields: dict[str, torch.Tensor] | None = None,
) -> tuple[torch.Tensor, Targets]:
    """Pair the hidden state at position t with its target, keeping targets != -100.

    ``labels`` follow the transformers convention (the same positions as ``input_ids``, shifted here: position
    t predicts ``labels[:, t + 1]``); ``shift_labels`` are already aligned (``shift_labels[:, t]`` is the
    target of position t), which stateful BPTT needs so that a chunk's last position predicts a target too
    (``hf_nlm.data.stream``). Given both, ``shift_labels`` wins, as in transformers' losses. ``fields`` are
    per-token tensors (B, T, ...) that follow the same convention as the labels given and are shifted and
    selected with them.

    Returns ``(hidden_selected (N, D), Targets(ids (N,), fields (N, ...)))``. Selecting before the output
    layer means positions that carry no target (context prefixes, padding) never reach the |V|-wide softmax.
    """
    if labels is None and shift_labels is None:
        raise ValueError("give labels (shifted inside) or shift_labels (already aligned)")
    fields = dict(fields or {})
    if shift_labels is None:
        hidden, targets = hidden[:, :-1], labels[:, 1:]
        fields = {name: value[:, 1:] for name, value in fields.items()}
    else:
        if shift_labels.shape != hidden.shape[:2]:
            raise ValueError(
                f"shift_labels has shape {tuple(shift_labels.shape)}, expected {tuple(hidden.shape[:2])}"
            )
        targets = shift_labels
    for name, value in fields.items():
        if value.shape[:2] != targets.shape:
            raise ValueError(
                f"{name} has shape {tuple(value.shape)}; its first two dimensions must be the labels' "
                f"{tuple(targets.shape)}"
            )
    targets = targets.to(hidden.device)
    keep = targets != -100
    return hidden[keep], Targets(targets[keep],
                                 {name: value.to(hidden.device)[keep] for name, value in fields.items()})


def shifted_targets(
    hidden: torch.Tensor, labels: torch.Tensor | None = None, shift_labels: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`align_targets` for ids alone: ``(hidden_selected (N, D), target ids (N,))``."""
    hidden, targets = align_targets(hidden, labels, shift_labels)
    return hidden, targets.ids
