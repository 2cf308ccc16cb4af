"""Storylines: one keyword phrase per sentence, extracted with RAKE, and the storyline text format (the
text of the ``rocstories`` corpus, :mod:`hf_nlm.data.corpora.rocstories`; :mod:`hf_nlm.story` re-exports it).

A storyline is the plan of a story: one short phrase per sentence ("big exam tomorrow # stressed
# ..."). Yao et al. (2019, "Plan-and-Write") extract it from the gold ROCStories with RAKE for
training; the LM approach here trains one LM over ``"title <sep> k1 # k2 # ... <sep> story"``.

RAKE (Rose, Engel, Cramer & Cowley 2010, "Automatic keyword extraction from individual documents"):

1. Candidate phrases: the sentence is cut at punctuation and at stopwords; each maximal run of
   other words is a candidate.
2. Word score ``deg(w) / freq(w)``: ``freq(w)`` counts the occurrences of ``w`` in candidates and
   ``deg(w)`` sums, over those occurrences, the length of the candidate (the row sum of the word
   co-occurrence matrix, whose diagonal holds ``freq``). Words found in long phrases score high.
3. Phrase score: the sum of its word scores. The top phrase is the keyword phrase of the sentence.

Words are compared in lowercase; the phrase is returned as written in the sentence. Ties between
phrases go to the one that comes first in the sentence, so the result is deterministic.

Why our own implementation and stopword list: the usual packages (``rake-nltk``) need NLTK's
stopword and punkt data, which are downloaded at run time (no network here, and a download per
user is a moving target); RAKE itself is twenty lines. :data:`STOPWORDS` is written out below so
the keywords never change with a package version.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = [
    "KEYWORD_SEP",
    "SEP",
    "STOPWORDS",
    "STORY_STAGES",
    "check_story_stage",
    "story_pair_dataset",
    "story_source",
    "storyline_source",
    "candidate_phrases",
    "extract_keyphrases",
    "extract_keywords",
    "storyline",
    "storyline_lm_dataset",
    "storyline_text",
    "word_scores",
]

#: Separator between title, storyline and story in the LM approach's training text.
SEP = "<sep>"
#: Separator between the keyword phrases of a storyline.
KEYWORD_SEP = "#"

# English function words (articles, pronouns, prepositions, conjunctions, auxiliaries and modals,
# common determiners and adverbs), in the spirit of Fox's stoplist that Rose et al. use.
STOPWORDS = frozenset(
    """
    a about above after again against ago all almost along already also although always am among an and
    another any anybody anyone anything anyway anywhere are aren't around as at away back be became
    because become becomes been before being below beside besides between beyond both but by can can't
    cannot could couldn't did didn't do does doesn't doing don't done down during each either else enough
    even ever every everybody everyone everything everywhere few for from further had hadn't has hasn't
    have haven't having he he'd he'll he's her here here's hers herself him himself his how how's however
    i i'd i'll i'm i've if in instead into is isn't it it's its itself just least less let let's like
    many may maybe me might more most much must mustn't my myself neither never next no nobody none nor
    not nothing now of off often on once one only onto or other others otherwise ought our ours ourselves
    out over own per perhaps quite rather really same several shall shan't she she'd she'll she's should
    shouldn't since so some somebody someone something sometimes somewhere soon still such than that
    that's the their theirs them themselves then there there's these they they'd they'll they're they've
    this those though through thus till to together too toward towards under until up upon us very via
    was wasn't we we'd we'll we're we've were weren't what what's whatever when when's where where's
    whether which while who who's whoever whom whose why why's will with within without won't would
    wouldn't yes yet you you'd you'll you're you've your yours yourself yourselves
    """.split()
)

# A word: letters or digits, with inner apostrophes or hyphens ("relative's", "all-nighter").
# Everything else that is not a space (punctuation, quotes, "#") ends a candidate phrase.
_WORD = re.compile(r"[^\W_]+(?:['’-][^\W_]+)*")


def _normal(word: str) -> str:
    return word.lower().replace("’", "'")


def candidate_phrases(sentence: str) -> list[list[str]]:
    """RAKE's candidate phrases of ``sentence`` in order: runs of words not cut by a stopword or by
    anything other than spaces between two words. Each phrase is a list of words as written."""
    phrases: list[list[str]] = []
    current: list[str] = []
    end = 0
    for match in _WORD.finditer(sentence):
        if sentence[end:match.start()].strip():  # punctuation between this word and the previous one
            current = _close(phrases, current)
        end = match.end()
        if _normal(match.group()) in STOPWORDS:
            current = _close(phrases, current)
        else:
            current.append(match.group())
    _close(phrases, current)
    return phrases


def _close(phrases: list[list[str]], current: list[str]) -> list[str]:
    if current:
        phrases.append(current)
    return []


def word_scores(phrases: Sequence[Sequence[str]]) -> dict[str, float]:
    """RAKE word scores ``deg(w) / freq(w)`` over candidate ``phrases`` (keys lowercased)."""
    freq: Counter[str] = Counter()
    degree: Counter[str] = Counter()
    for phrase in phrases:
        for word in phrase:
            freq[_normal(word)] += 1
            degree[_normal(word)] += len(phrase)
    return {word: degree[word] / freq[word] for word in freq}


def extract_keyphrases(sentence: str, top_k: int = 1, max_words: int | None = 3) -> list[str]:
    """The ``top_k`` best RAKE phrases of ``sentence`` (see the module docstring), in sentence order.

    ``max_words`` bounds the length of a returned phrase: a candidate longer than that stands for its
    best window of ``max_words`` consecutive words (the highest sum of word scores, the first on ties).
    Scores are still RAKE's, computed on the whole candidates. Phrases are distinct (in lowercase).

    Fall-back when the sentence has no candidate (only stopwords): its longest word, the first on
    ties, so that every sentence gets a keyword ("It was him." -> "was"); a sentence with no word at
    all gives no phrase.
    """
    if top_k < 1:
        raise ValueError(f"top_k must be >= 1, got {top_k}")
    if max_words is not None and max_words < 1:
        raise ValueError(f"max_words must be >= 1 or None, got {max_words}")
    phrases = candidate_phrases(sentence)
    if not phrases:
        words = _WORD.findall(sentence)
        return [max(words, key=len)] if words else []
    scores = word_scores(phrases)
    ranked: dict[str, tuple[float, int, list[str]]] = {}  # lowercased phrase -> (score, position, words)
    for position, phrase in enumerate(phrases):
        words = _best_window(phrase, scores, max_words)
        key = " ".join(_normal(w) for w in words)
        if key not in ranked:
            ranked[key] = (sum(scores[_normal(w)] for w in words), position, words)
    best = sorted(ranked.values(), key=lambda item: (-item[0], item[1]))[:top_k]
    return [" ".join(words) for _, _, words in sorted(best, key=lambda item: item[1])]


def _best_window(phrase: list[str], scores: Mapping[str, float], max_words: int | None) -> list[str]:
    if max_words is None or len(phrase) <= max_words:
        return phrase
    starts = range(len(phrase) - max_words + 1)
    best = max(starts, key=lambda s: (sum(scores[_normal(w)] for w in phrase[s:s + max_words]), -s))
    return phrase[best:best + max_words]


def extract_keywords(sentence: str, max_words: int | None = 3) -> str:
    """The RAKE keyword phrase of one sentence (the top phrase of :func:`extract_keyphrases`), or ""
    for a sentence without any word."""
    phrases = extract_keyphrases(sentence, top_k=1, max_words=max_words)
    return phrases[0] if phrases else ""


def storyline(sentences: Sequence[str], max_words: int | None = 3) -> list[str]:
    """One keyword phrase per sentence (:func:`extract_keywords`): the storyline of a story."""
    if isinstance(sentences, str):
        raise TypeError("storyline() takes the list of a story's sentences, not one string")
    return [extract_keywords(sentence, max_words) for sentence in sentences]


def storyline_text(
    title: str, keywords: Sequence[str], story: str | None = None, sep: str = SEP
) -> str:
    """The LM approach's training text ``"title <sep> k1 # k2 # ... <sep> story"``; without ``story``, the
    prompt ``"title <sep> k1 # k2 # ... <sep>"`` from which an LM generates the story.

    Spaces around the separators make them separate words for a whitespace tokenizer. Text that would
    make the format ambiguous is an error: ``sep`` or a newline anywhere (the LM reads one story per
    line), ``#`` in a keyword (RAKE never returns one: ``#`` is punctuation). A ``#`` in the title or
    the story is fine, since the fields are found by ``sep``.
    """
    if isinstance(keywords, str):
        raise TypeError("keywords must be a list of phrases, not one string")
    fields = [("title", title), *(("keyword", k) for k in keywords), ("story", story or "")]
    for name, value in fields:
        if sep in value or "\n" in value or (name == "keyword" and KEYWORD_SEP in value):
            holds = f"{sep!r} or a newline" if name != "keyword" else f"{sep!r}, {KEYWORD_SEP!r} or a newline"
            raise ValueError(f"storyline_text: the {name} {value!r} holds {holds}")
    plan = f" {KEYWORD_SEP} ".join(k.strip() for k in keywords)
    prompt = f"{title.strip()} {sep} {plan} {sep}"
    return prompt if story is None else f"{prompt} {story.strip()}"


def _lm_example(example: Mapping[str, Any], max_words: int | None, sep: str) -> dict[str, Any]:
    keywords = storyline(example["sentences"], max_words)
    return {"storyline": keywords, "text": storyline_text(example["title"], keywords, example["story"], sep)}


def storyline_lm_dataset(stories, max_words: int | None = 3, sep: str = SEP):
    """Map :func:`hf_nlm.data.load_rocstories`' output (a ``DatasetDict`` or one split) to the LM
    format: adds ``storyline`` (list of phrases) and ``text`` (:func:`storyline_text` with the story),
    the column ``hf_nlm.training.train_lm`` reads, one story per row."""
    return stories.map(_lm_example, fn_kwargs={"max_words": max_words, "sep": sep}, desc="storylines")


#: The stages of the seq2seq approach (Yao et al. 2019, sec. 3): title -> storyline, and
#: ``"title <sep> storyline"`` -> story.
STORY_STAGES = ("storyline", "story")


def storyline_source(title: str) -> str:
    """The source text of the storyline stage of the seq2seq approach: the title."""
    return title.strip()


def story_source(title: str, keywords: Sequence[str], sep: str = SEP) -> str:
    """The source text of the story stage of the seq2seq approach: ``"title <sep> k1 # k2 # ..."``."""
    return storyline_text(title, keywords, sep=sep).removesuffix(sep).strip()


def _pair_example(example: Mapping[str, Any], stage: str, max_words: int | None, sep: str) -> dict[str, Any]:
    keywords = storyline(example["sentences"], max_words)
    if stage == "storyline":
        return {"source": storyline_source(example["title"]), "target": f" {KEYWORD_SEP} ".join(keywords)}
    return {"source": story_source(example["title"], keywords, sep), "target": example["story"]}


def check_story_stage(stage: str) -> None:
    """``stage`` is one of :data:`STORY_STAGES` (``ValueError`` naming ``--story-stage`` otherwise)."""
    if stage not in STORY_STAGES:
        raise ValueError(f"--story-stage {stage!r}: choose from {', '.join(STORY_STAGES)} (title -> "
                         "storyline, or 'title <sep> storyline' -> story)")


def story_pair_dataset(stories, stage: str, max_words: int | None = 3, sep: str = SEP):
    """The (``source``, ``target``) pairs of one stage of the seq2seq approach (Yao et al. 2019) from
    :func:`hf_nlm.data.load_rocstories`' output (a ``DatasetDict`` or one split): ``stage="storyline"``, title
    -> ``"k1 # k2 # ..."``; ``stage="story"``, ``"title <sep> k1 # ..."`` -> story. The story's other columns
    are kept."""
    check_story_stage(stage)
    return stories.map(_pair_example, fn_kwargs={"stage": stage, "max_words": max_words, "sep": sep},
                       desc="title -> storyline" if stage == "storyline" else "storyline -> story")
