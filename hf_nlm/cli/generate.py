"""Commands that run saved models: ``hf-nlm generate``, ``story``, ``plot-attention`` and
``plot-numerals``."""

from __future__ import annotations

import argparse
import copy
import json
import math
import sys
from pathlib import Path

from ..generation import MAX_NEW_TOKENS, MIN_NEW_TOKENS, SAMPLING_DEFAULTS, check_generation_settings
from .arguments import add_folder_command, add_generation_arguments, fail, load_saved_run, picture_file

#: The flags that default to the model's generation config: given, they go to ``generate()``; left out, the
#: model's generation config decides, as it does for ``model.generate(ids)`` and ``pipeline``.
GIVEN_SETTINGS = ("num_beams", "max_new_tokens", "min_new_tokens", "no_repeat_ngram_size")

#: The lengths ``hf-nlm generate`` gives a model whose generation config names none (neither the number of new
#: tokens nor a total length): the library's defaults, which every model's generation config starts from
#: (:func:`hf_nlm.generation.generation_defaults`). Each: (the total-length field that also names one, the
#: length).
LENGTH_FALLBACKS = {"max_new_tokens": ("max_length", MAX_NEW_TOKENS),
                    "min_new_tokens": ("min_length", MIN_NEW_TOKENS)}


def add_generate_parser(sub: argparse._SubParsersAction, help_text: str) -> argparse.ArgumentParser:
    generate = add_folder_command(sub, "generate", help_text, "a saved model folder")
    generate.add_argument("prompts", nargs="+", metavar="PROMPT", help="text to continue")
    generate.add_argument("--max-new-tokens", type=int, default=None,
                          help="tokens to add at most (default: the model's generation config: 20 for a "
                               "model hf-nlm train made)")
    generate.add_argument("--min-new-tokens", type=int, default=None,
                          help="tokens to add at least, before the text may end; 0 = none (default: the "
                               "model's generation config: 1 for a model hf-nlm train made)")
    add_generation_arguments(generate)
    generate.add_argument("--num-return-sequences", type=int, default=1,
                          help="continuations per prompt (default: 1)")
    generate.add_argument("--json", action="store_true", help="print one JSON object per prompt")
    return generate


def add_story_parser(sub: argparse._SubParsersAction, help_text: str) -> argparse.ArgumentParser:
    story = sub.add_parser("story", help=help_text)
    story.add_argument("titles", nargs="+", metavar="TITLE")
    story.add_argument("--model", default=None, help="one LM folder for both stages")
    story.add_argument("--storyline-model", default=None, help="model folder for title -> storyline")
    story.add_argument("--story-model", default=None, help="model folder for title + storyline -> story")
    add_generation_arguments(story)
    story.add_argument("--length-penalty", type=float, default=1.0,
                       help="beam search ranks finished hypotheses by sum log p / length**LP (default: 1.0, "
                            "the length-normalised (1/t) sum log p)")
    story.add_argument("--json", action="store_true", help="print one JSON object per title")
    story.set_defaults(num_return_sequences=1)
    return story


def add_plot_attention_parser(sub: argparse._SubParsersAction, help_text: str) -> argparse.ArgumentParser:
    attention = add_folder_command(sub, "plot-attention", help_text, "a saved story_seq2seq model folder")
    attention.add_argument("source", help="the source text")
    attention.add_argument("--output", type=picture_file, default=None,
                           help="PNG file (default: MODEL_DIR/attention.png)")
    attention.add_argument("--num-beams", type=int, default=1, help="beam width (default: 1, greedy)")
    attention.add_argument("--max-new-tokens", type=int, default=50,
                           help="tokens to generate at most (default: 50)")
    return attention


def add_plot_numerals_parser(sub: argparse._SubParsersAction, help_text: str) -> argparse.ArgumentParser:
    plot = add_folder_command(sub, "plot-numerals", help_text, "a saved model folder")
    plot.add_argument("--output", type=picture_file, default=None,
                      help="PNG file (default: MODEL_DIR/numeral_embeddings.png)")
    plot.add_argument("--which", choices=("output", "input"), default="output",
                      help="the head's numeral rows (output, default) or the input embeddings")
    plot.add_argument("--density-after", default=None, metavar="TEXT",
                      help="instead: a mog model's predicted density of the next numeral after TEXT")
    plot.add_argument("--value", type=float, default=None,
                      help="with --density-after: the true value, marked")
    plot.add_argument("--weights-along", default=None, metavar="TEXT",
                      help="instead: a combination model's strategy weights p(m | h) at every token of TEXT")
    plot.add_argument("--surprisal-along", default=None, metavar="TEXT",
                      help="instead: TEXT with each numeral coloured by its surprisal "
                           "and the model's median above it")
    return plot


def check_generation_arguments(args: argparse.Namespace) -> None:
    """Refuse generation flags that make no sense (``ValueError``): before the model loads, the flags given; a
    flag left out (None) is checked by :func:`with_saved_defaults` once the saved value is known."""
    check_generation_settings(
        do_sample=args.do_sample, num_beams=args.num_beams, num_return_sequences=args.num_return_sequences,
        max_new_tokens=getattr(args, "max_new_tokens", None),
        min_new_tokens=getattr(args, "min_new_tokens", None),
        temperature=args.temperature, top_k=args.top_k, top_p=args.top_p,
        no_repeat_ngram_size=args.no_repeat_ngram_size,
    )


def generation_settings(args: argparse.Namespace) -> dict:
    """``generate()`` keyword arguments from the flags of :func:`add_generation_arguments` (checked by
    :func:`check_generation_arguments`; a bad setting ends the command with a usage error): the flags given,
    and when sampling, the sampling settings with :data:`SAMPLING_DEFAULTS` for those not given. Every setting
    left out comes from the model's generation config, as for ``model.generate(ids)``."""
    try:
        check_generation_arguments(args)
    except ValueError as err:
        fail(args.parser, str(err))
    settings = {name: getattr(args, name) for name in GIVEN_SETTINGS
                if getattr(args, name, None) is not None}
    if args.do_sample:
        settings["do_sample"] = True
        settings.update({k: default if getattr(args, k) is None else getattr(args, k)
                         for k, default in SAMPLING_DEFAULTS.items()})
    if args.allow_unknown:
        settings["suppress_tokens"] = None
    return settings


def with_saved_defaults(args: argparse.Namespace, settings: dict, generation_config) -> dict:
    """``settings`` for a model with ``generation_config``: the lengths of :data:`LENGTH_FALLBACKS` where
    neither the flags nor the config name one (a model saved without the library's generation settings,
    :func:`hf_nlm.generation.generation_defaults`), checked against the values the config gives the
    settings left out (``--min-new-tokens 30`` over a saved ``max_new_tokens`` of 20 ends the command with a
    usage error)."""
    from ..modeling_utils import generation_count_problem

    settings = dict(settings)
    resolved = copy.copy(generation_config)
    for name, value in settings.items():
        setattr(resolved, name, value)
    problem = generation_count_problem(resolved)
    if problem is not None and problem[0] not in settings:  # a flag's own value is checked as the flag
        name, value, least = problem
        # The file's own key, not the flag (fail() would write it as the flag).
        args.parser.error(f"{args.model_dir}/generation_config.json: {name} must be an integer >= {least}, "
                          f"got {value!r}; fix the file, or give --{name.replace('_', '-')}")
    for name, (total, fallback) in LENGTH_FALLBACKS.items():
        named = getattr(generation_config, name) is not None or getattr(generation_config, total) is not None
        if name not in settings and not named:
            settings[name] = fallback
    saved = {name: settings.get(name, getattr(generation_config, name))
             for name in ("max_new_tokens", "min_new_tokens", "num_beams", "do_sample")}
    # generate()'s own defaults where the config names none
    saved["num_beams"], saved["do_sample"] = saved["num_beams"] or 1, bool(saved["do_sample"])
    try:
        check_generation_arguments(argparse.Namespace(**{**vars(args), **saved}))
    except ValueError as err:
        fail(args.parser, str(err))
    return settings


def cmd_generate(args: argparse.Namespace) -> int:
    """Continue each PROMPT with a saved model. The search (beams, sampling, lengths) is the model's saved
    generation config, as for model.generate() and pipeline(); a flag given overrides its setting. Prints
    each continuation, or one JSON object per prompt with --json."""
    import torch

    settings = generation_settings(args)
    from ..data.lm import unknown_token_ids
    from ..evaluation import decode_generated

    model, tokenizer = load_saved_run(args.parser, args.model_dir)
    settings = with_saved_defaults(args, settings, model.generation_config)
    if args.seed is not None:
        torch.manual_seed(args.seed)
    model.eval()
    for prompt in args.prompts:
        ids = tokenizer(prompt, return_tensors="pt", add_special_tokens=False).input_ids
        unknown = int(torch.isin(ids, torch.tensor(unknown_token_ids(tokenizer))).sum())
        if unknown and 2 * unknown >= ids.shape[1]:
            print(f"warning: {unknown} of the {ids.shape[1]} tokens of the prompt {prompt!r} are not in the "
                  f"model's vocabulary (they read as {tokenizer.unk_token}); "
                  "the continuation has little to go on",
                  file=sys.stderr)
        if model.config.is_encoder_decoder:  # a source reads as in training: its tokens, then <eos>
            ids = torch.cat([ids, ids.new_full((1, 1), tokenizer.eos_token_id)], dim=1)
        # An empty prompt starts from the sentence boundary (generate() puts bos_token_id there).
        try:
            out = model.generate(
                ids,
                attention_mask=torch.ones_like(ids),
                **settings,
                num_return_sequences=args.num_return_sequences,
                pad_token_id=tokenizer.pad_token_id,
                return_dict_in_generate=True,
            )
        except ValueError as err:  # settings that leave no token to write, or that generate() refuses
            fail(args.parser, str(err).removeprefix("generate(): "))
        # A causal LM's output repeats the prompt; an encoder-decoder's is the target alone.
        start = 0 if model.config.is_encoder_decoder else max(ids.shape[1], 1)
        # An open-vocabulary numeral strategy (d-RNN, MoG) wrote out each <unk_num> it generated.
        numerals = getattr(out, "numerals", None) or [{} for _ in out.sequences]
        written = [{t - start: text for t, text in found.items() if t >= start} for found in numerals]
        if args.json:
            texts = [decode_generated(tokenizer, seq[start:], found)
                     for seq, found in zip(out.sequences, written, strict=True)]
            print(json.dumps({"prompt": prompt, "generations": texts}))
        else:
            for seq, found in zip(out.sequences, written, strict=True):
                if model.config.is_encoder_decoder:  # the target stands alone: no continuation of the source
                    print(decode_generated(tokenizer, seq[start:], found).strip())
                else:
                    print(decode_generated(tokenizer, seq[start:], found, prompt=prompt))
    return 0


def cmd_story(args: argparse.Namespace) -> int:
    """Write a story for each TITLE in two stages (Yao et al. 2019, Plan-and-Write): title -> storyline (one
    keyword phrase per sentence) -> story. Either one LM trained on 'title <sep> k1 # k2 ... <sep> story'
    (--model) serves both stages, or a model per stage (--storyline-model, --story-model), each a causal LM
    or a story_seq2seq model."""
    import torch

    from ..story import write_story

    settings = {**generation_settings(args), "length_penalty": args.length_penalty}
    if args.model is None and args.storyline_model is None:
        fail(args.parser, "give --model (one LM trained on 'title <sep> storyline <sep> story') or "
                           "--storyline-model and --story-model")
    if args.model is not None and (args.storyline_model or args.story_model):
        fail(args.parser, "--model serves both stages: give it alone, or --storyline-model and --story-model")
    if args.storyline_model is not None and args.story_model is None:
        fail(args.parser, "--storyline-model needs --story-model")
    first = load_saved_run(args.parser, args.model or args.storyline_model,
                           "--model" if args.model else "--storyline-model")
    second = first if args.model else load_saved_run(args.parser, args.story_model, "--story-model")
    for model, _ in (first, second):
        model.eval()
    if args.seed is not None:
        torch.manual_seed(args.seed)
    for title in args.titles:
        try:
            story = write_story(title, *first, *second, **settings)
        except ValueError as err:
            fail(args.parser, str(err))
        if args.json:
            print(json.dumps(story))
        else:
            print(f"{story['title']}\n  storyline: {' # '.join(story['storyline'])}\n"
                  f"  story: {story['story']}")
    return 0


def cmd_plot_attention(args: argparse.Namespace) -> int:
    """Generate from SOURCE with a saved story_seq2seq model and draw its attention weights (source words x
    generated words) as a heatmap."""
    from ..plots.attention import plot_attention

    model, tokenizer = load_saved_run(args.parser, args.model_dir)
    if not model.config.is_encoder_decoder:
        fail(args.parser, f"{args.model_dir} holds a {model.config.model_type} model; attention maps need an "
                           "encoder-decoder with attention (model_type story_seq2seq)")
    model.eval()
    output = args.output or str(Path(args.model_dir) / "attention.png")
    result = _draw(args.parser, output, lambda: plot_attention(model, tokenizer, args.source, output,
                                                               num_beams=args.num_beams,
                                                               max_new_tokens=args.max_new_tokens))
    print(json.dumps({"source": args.source, "output": result[0] if isinstance(result, tuple) else result,
                      "picture": output}))
    return 0


def _draw(parser: argparse.ArgumentParser, output: str, draw):
    """``draw()``, which writes the picture ``output``; bad input or a file that cannot be written ends the
    command with a usage error naming it."""
    try:
        return draw()
    except ValueError as err:
        fail(parser, str(err))
    except OSError as err:
        fail(parser, f"cannot write the picture {output}: {err.strerror or err}")


def _numeral_embeddings(plot, model, tokenizer, output: str, which: str):
    """``plot(model, tokenizer, output, which=which)``; its errors name the flag (``--which input``), not the
    Python argument (``which='input'``)."""
    try:
        return plot(model, tokenizer, output, which=which)
    except ValueError as err:
        raise ValueError(str(err).replace("which='input'", "--which input")) from err


def cmd_plot_numerals(args: argparse.Namespace) -> int:
    """The numerals' vectors of a saved model trained with the numeracy tokenizer on their first two
    principal components, coloured by log10(1 + |value|) (Spithourakis & Riedel 2018, fig. 2)."""
    from ..plots.numerals import (
        plot_numeral_density,
        plot_numeral_embeddings,
        plot_numeral_surprisal,
        plot_strategy_weights,
    )

    if args.value is not None and not math.isfinite(args.value):
        fail(args.parser, f"--value must be a finite number, got {args.value}")
    model, tokenizer = load_saved_run(args.parser, args.model_dir)
    if getattr(tokenizer, "numeral_vocab", None) is None:
        fail(args.parser, f"{args.model_dir}: its tokenizer does not tell numerals from words (train the "
                           "model with --tokenizer numeracy)")
    chosen = [flag for flag, value in (("--density-after", args.density_after),
                                       ("--weights-along", args.weights_along),
                                       ("--surprisal-along", args.surprisal_along)) if value is not None]
    if len(chosen) > 1:
        fail(args.parser, f"{' and '.join(chosen)} draw different pictures: give one of them")
    name = ("numeral_density.png" if args.density_after is not None else
            "strategy_weights.png" if args.weights_along is not None else
            "numeral_surprisal.png" if args.surprisal_along is not None else "numeral_embeddings.png")
    output = args.output or str(Path(args.model_dir) / name)
    if args.density_after is not None:
        _draw(args.parser, output, lambda: plot_numeral_density(model, tokenizer, args.density_after, output,
                                                                value=args.value))
    elif args.weights_along is not None:
        _draw(args.parser, output, lambda: plot_strategy_weights(model, tokenizer, args.weights_along,
                                                                 output))
    elif args.surprisal_along is not None:
        _draw(args.parser, output, lambda: plot_numeral_surprisal(model, tokenizer, args.surprisal_along,
                                                                  output))
    else:
        _draw(args.parser, output, lambda: _numeral_embeddings(plot_numeral_embeddings, model, tokenizer,
                                                               output, args.which))
    print(output)
    return 0
