"""hf_nlm: classic neural language models as ordinary Hugging Face transformers models.

Importing the package registers every model type of :data:`hf_nlm.models.MODEL_TYPES` with the
transformers Auto classes, so that ``AutoConfig`` / ``AutoModelForCausalLM`` /
``pipeline("text-generation")`` load them without ``trust_remote_code``.
"""

from . import models
from .models import *  # noqa: F403  (the config and model classes, listed in models.__all__)
from .models import register_auto_classes
from .tokenization import numerals as _numerals  # noqa: F401  (registers NumeracyTokenizerFast with AutoTokenizer)

__version__ = "0.1.0.dev0"

register_auto_classes()

__all__ = [*models.__all__, "__version__"]
