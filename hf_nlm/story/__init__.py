"""Story generation, title -> storyline -> story (Yao et al. 2019, "Plan-and-Write"):
:mod:`~hf_nlm.story.storylines` extracts the storylines (RAKE keyword phrases, one per sentence) and
writes the training texts; :mod:`~hf_nlm.story.generation` runs the two stages with any model of the
package."""

from .generation import (
    generate_story,
    generate_storyline,
    story_pairs,
    story_source,
    storyline_pairs,
    storyline_source,
    write_story,
)
from .storylines import (
    KEYWORD_SEP,
    SEP,
    add_storylines,
    extract_keywords,
    storyline,
    storyline_lm_dataset,
    storyline_text,
)

__all__ = [
    "KEYWORD_SEP",
    "SEP",
    "add_storylines",
    "extract_keywords",
    "generate_story",
    "generate_storyline",
    "story_pairs",
    "story_source",
    "storyline",
    "storyline_lm_dataset",
    "storyline_pairs",
    "storyline_source",
    "storyline_text",
    "write_story",
]
