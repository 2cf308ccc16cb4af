"""The story example with its default (``small``) preset on the fixture stories: what a first run gives.

Runs ``examples/train_story.py --rocstories tests/fixtures/rocstories --story-cloze <the fixture's Story
Cloze file>`` with no other flag in a fresh interpreter and prints ONE JSON line on stdout: the wall time
of the whole command, the parameter count, the validation and test perplexity, the Story Cloze accuracy
with its item count, and the sample story (Yao et al. 2019's title -> storyline -> story, one AWD-LSTM of
Merity et al. 2018). The fixture holds 8 stories (6 / 1 / 1 by the preset's split) and 4 Story Cloze items,
so the accuracy moves in steps of 0.25.

``--corpus templated`` runs the same command on 400 templated stories (six everyday plots, their slots
filled at random; 70 / 15 / 15 % split by the preset) and 60 Story Cloze items whose wrong ending closes a
story of another plot: the size the ``small`` preset is made for, and a task easy by design.

    python benchmarks/story_defaults.py --threads 1 >> benchmarks/results/story_defaults.jsonl
    python benchmarks/story_defaults.py --threads 1 --corpus templated \
        >> benchmarks/results/story_defaults.jsonl
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import random
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import torch
from common import emit_json, log, machine

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures" / "rocstories"
CLOZE = FIXTURES / "cloze_test_val__spring2016 - cloze_test_ALL_val.csv"
BENCHMARK = "story_defaults"
ROCSTORIES_FILE = "ROCStories__spring2016 - ROCStories_spring2016.csv"

# Templated stories for --corpus templated: six everyday plots, each five sentences with slots (name and
# pronouns, days, places, objects) filled at random. Easy by design: a model that learns the plots writes
# them.
NAMES = [("Amy", "She", "her"), ("Ben", "He", "his"), ("Carla", "She", "her"), ("Dev", "He", "his"),
         ("Eli", "He", "his"), ("Fay", "She", "her"), ("Gus", "He", "his"), ("Hana", "She", "her"),
         ("Ivan", "He", "his"), ("June", "She", "her"), ("Kofi", "He", "his"), ("Lia", "She", "her")]
PLOTS = [
    ("The Lost {Thing}", ["{N} could not find {p} {thing}.",
                          "{S} looked under the {place1} and in the {place2}.",
                          "{S} asked {p} {rel} for help.", "They found the {thing} behind the {place3}.",
                          "{N} was happy to have {p} {thing} back."],
     {"thing": ["keys", "wallet", "hat", "phone", "book"]}),
    ("The Big Test", ["{N} had a big {subject} test on {day}.", "{S} studied every night for a week.",
                      "{S} felt nervous on the morning of the test.",
                      "The questions were easier than {s} expected.", "{N} got a good grade and smiled."],
     {"subject": ["math", "history", "science", "spelling"]}),
    ("Rainy {Day}", ["It started to rain on {day} afternoon.", "{N} had forgotten {p} umbrella at home.",
                     "{S} ran into a {shop} to stay dry.", "{S} drank a hot {drink} while waiting.",
                     "When the rain stopped, {N} walked home."],
     {"shop": ["bakery", "cafe", "library", "store"], "drink": ["tea", "coffee", "cocoa"]}),
    ("The New {Pet}", ["{N} wanted a {pet} for a long time.", "{P} {rel} took {o} to the shelter.",
                       "{S} picked a small {pet} with {color} fur.",
                       "The {pet} was shy for the first few days.",
                       "Now the {pet} sleeps on {N}'s bed every night."],
     {"pet": ["dog", "cat", "puppy", "kitten"], "color": ["brown", "black", "white", "gray"]}),
    ("Burnt {Food}", ["{N} decided to cook {food} for dinner.", "{S} forgot about the pan while reading.",
                      "The kitchen filled with smoke.", "The {food} was black and burnt.",
                      "{N} ordered pizza for dinner instead."], {"food": ["rice", "pasta", "toast", "eggs"]}),
    ("The Race", ["{N} signed up for a race in the park.", "{S} trained every morning for a month.",
                  "On the day of the race it was very hot.", "{S} kept running even when {s} was tired.",
                  "{N} finished the race and felt proud."], {}),
]
PLACES = ["bed", "couch", "table", "desk", "car seat", "door mat"]


def templated_story(plot: int, rng: random.Random) -> tuple[str, list[str]]:
    """The title and five sentences of one story of plot ``plot``, its slots drawn with ``rng``."""
    title, sentences, choices = PLOTS[plot]
    name, subject, possessive = rng.choice(NAMES)
    slots = {key: rng.choice(values) for key, values in choices.items()}
    slots.update({key.capitalize(): value.capitalize() for key, value in slots.items()})
    place1, place2, place3 = rng.sample(PLACES, 3)
    day = rng.choice(["Monday", "Tuesday", "Friday", "Saturday"])
    slots.update(N=name, S=subject, s=subject.lower(), p=possessive, P=possessive.capitalize(), day=day,
                 Day=day, o="him" if subject == "He" else "her",
                 rel=rng.choice(["mother", "brother", "friend", "sister"]),
                 place1=place1, place2=place2, place3=place3)
    return title.format(**slots), [sentence.format(**slots) for sentence in sentences]


def write_templated(folder: Path, num_stories: int = 400, num_cloze: int = 60, seed: int = 0) -> Path:
    """ROCStories and Story Cloze CSVs of templated stories in ``folder``; returns the Story Cloze file. A
    Story Cloze item's wrong ending is the last sentence of a story of another plot."""
    rng = random.Random(seed)
    with open(folder / ROCSTORIES_FILE, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["storyid", "storytitle", *(f"sentence{i}" for i in range(1, 6))])
        for i in range(num_stories):
            title, sentences = templated_story(i % len(PLOTS), rng)
            writer.writerow([uuid.UUID(int=rng.getrandbits(128)), title, *sentences])
    cloze = folder / "cloze.csv"
    with open(cloze, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["InputStoryid", *(f"InputSentence{i}" for i in range(1, 5)),
                         "RandomFifthSentenceQuiz1", "RandomFifthSentenceQuiz2", "AnswerRightEnding"])
        for i in range(num_cloze):
            plot = i % len(PLOTS)
            _, sentences = templated_story(plot, rng)
            _, other = templated_story((plot + 1 + rng.randrange(len(PLOTS) - 1)) % len(PLOTS), rng)
            first = rng.random() < 0.5
            endings = [sentences[4], other[4]] if first else [other[4], sentences[4]]
            writer.writerow([uuid.UUID(int=rng.getrandbits(128)), *sentences[:4], *endings,
                             1 if first else 2])
    return cloze


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--corpus", choices=("fixture", "templated"), default="fixture",
                        help="the fixture stories (default) or 400 templated ones")
    parser.add_argument("--threads", type=int, default=None,
                        help="OMP_NUM_THREADS of the run (default: unset)")
    args = parser.parse_args()
    env = dict(os.environ,
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    if args.threads:
        env["OMP_NUM_THREADS"] = str(args.threads)
    with tempfile.TemporaryDirectory() as out:
        stories, cloze = FIXTURES, CLOZE
        if args.corpus == "templated":
            stories = Path(out) / "stories"
            stories.mkdir()
            cloze = write_templated(stories)
        command = [sys.executable, str(ROOT / "examples" / "train_story.py"), "--rocstories", str(stories),
                   "--output-dir", str(Path(out) / "run"), "--story-cloze", str(cloze)]
        log(f"{BENCHMARK} on {machine()}: {' '.join(command[1:])}")
        start = time.perf_counter()
        done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
        wall = time.perf_counter() - start
    if done.returncode:
        sys.exit(f"train_story.py exited with {done.returncode}:\n{done.stderr[-3000:]}")
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    emit_json(BENCHMARK, {
        "corpus": args.corpus, "preset": summary["preset"], "wall_s": round(wall, 1),
        "num_parameters": summary["num_parameters"], "validation_perplexity": round(summary["validation"], 2),
        "test_perplexity": round(summary["test"], 2), "story_cloze_accuracy": summary["story_cloze_accuracy"],
        "story_cloze_examples": summary["story_cloze_examples"], "sample": summary["sample"],
        "machine": machine(), "threads": args.threads, "torch": torch.__version__,
    })


if __name__ == "__main__":
    main()
