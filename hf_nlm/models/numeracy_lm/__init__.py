from dataclasses import replace

from ...tokenization.numerals import NumeracyTokenizerFast
from ..registry import ADAM_DEFAULT, PLAIN_SGD, ModelType, TrainingRecipe
from .configuration_numeracy_lm import NumeracyLMConfig
from .modeling_numeracy_lm import NumeracyLMForCausalLM, NumeracyLMModel, NumeracyLMPreTrainedModel

#: The output strategies of the numeracy tables (``benchmarks/numeracy_table.py``), in their rows' order: the
#: six of Spithourakis & Riedel (ACL 2018, sec. 3) and Berg-Kirkpatrick & Spokoyny's (EMNLP 2020) ``dexp``.
TABLE_STRATEGIES = ("softmax", "softmax_digits", "hsoftmax", "drnn", "mog", "combination", "dexp")

#: The corpora of the numeracy tables and the epochs of each row there: State of the Union addresses split by
#: year (2 epochs), the DROP passages (Dua et al. 2019; 3 epochs).
TABLE_CORPORA = {"sotu": 2, "drop": 3}

#: What every row of the numeracy tables trains with (Spithourakis & Riedel 2018, sec. 4): Adam at 1e-3
#: held constant, clipping 1.0, 32 stream columns of 50-token BPTT blocks, early stopping after 2 epochs
#: without a better validation perplexity, random seed `0` (the weights and the training order).
TABLE_TRAINING = {"optimizer": "adam", "learning_rate": 1e-3, "lr_scheduler": "constant", "weight_decay": 0.0,
                  "max_grad_norm": 1.0, "batch_size": 32, "block_size": 50, "eval_batch_size": 10,
                  "early_stopping_patience": 2, "logging_steps": 200, "save_total_limit": 1, "seed": 0}


def table_recipe_name(corpus: str, strategy: str) -> str:
    """The recipe of one row of a numeracy table: ``sotu-hsoftmax``, ``drop-softmax-digits``."""
    return f"{corpus}-{strategy.replace('_', '-')}"


def table_recipe(corpus: str, strategy: str) -> TrainingRecipe:
    """The row ``strategy`` of the numeracy table on ``corpus`` (a key of :data:`TABLE_CORPORA`): the paper's
    body (a 1 x 50 LSTM, 50-dimensional embeddings, dropout 0.1: NumeracyLMConfig's defaults) with the output
    strategy ``strategy``, the numeracy tokenizer's 5,000 most frequent tokens (words and numerals ranked
    together, as Spithourakis & Riedel 2018 keep 5,000 tokens of arXiv abstracts) with punctuation cut off
    words, :data:`TABLE_TRAINING` for the corpus's epochs."""
    cited = ("Berg-Kirkpatrick & Spokoyny 2020, the discrete latent exponent" if strategy == "dexp"
             else "Spithourakis & Riedel 2018, sec. 3")
    return TrainingRecipe(
        f"the {strategy} row of the numeracy table on {corpus.upper()} (`benchmarks/numeracy_table.py "
        f"--corpus {corpus}`): numeral strategy {strategy} ({cited}) over the paper's 1 x 50 LSTM with "
        "dropout 0.1, the numeracy tokenizer's top 5,000 tokens with punctuation cut off words, Adam "
        f"(Kingma & Ba 2015) at 1e-3, 32 x 50-token blocks, {TABLE_CORPORA[corpus]} epochs with early "
        "stopping, random seed `0`",
        training={**TABLE_TRAINING, "num_epochs": TABLE_CORPORA[corpus]},
        model={"head": strategy, "embedding_size": 50, "hidden_size": 50, "numeral_loss_weight": 1.0,
               "mog_trainable": False},
        tokenizer={"vocab_size": 5000, "split_punctuation": True, "min_frequency": 1},
        data={"corpus": corpus},
    )


RECIPES = {
    # The paper's top-K vocabulary (Spithourakis & Riedel 2018 keep 5,000 tokens of arXiv abstracts): a
    # softmax over every word and numeral of a number-rich text is tens of thousands wide, and most of them
    # are seen once.
    "default": replace(ADAM_DEFAULT, tokenizer={"vocab_size": 5000}),
    "sgd": PLAIN_SGD,
    # The rows of the tables of docs/models/numeracy.md. The paper's figures are on clinical notes and arXiv
    # abstracts, not on these corpora, so none is set beside them.
    **{table_recipe_name(corpus, strategy): table_recipe(corpus, strategy)
       for corpus in TABLE_CORPORA for strategy in TABLE_STRATEGIES},
}

MODEL_TYPE = ModelType(NumeracyLMConfig, NumeracyLMModel, causal_lm_class=NumeracyLMForCausalLM,
                       tokenizer_class=NumeracyTokenizerFast, default_tokenizer="numeracy", recipes=RECIPES)

__all__ = ["MODEL_TYPE", "TABLE_CORPORA", "TABLE_STRATEGIES", "NumeracyLMConfig", "NumeracyLMForCausalLM",
           "NumeracyLMModel", "NumeracyLMPreTrainedModel", "table_recipe", "table_recipe_name"]
