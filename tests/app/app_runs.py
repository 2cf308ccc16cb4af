"""What the web demo's tests share: the toy texts and how a run folder is written."""

from __future__ import annotations

TEXTS = ["the cat sat on the mat", "the dog sat on the log", "a cat saw a dog",
         "the dog saw the cat on the mat"] * 3


def save(model, tok, folder):
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


def special_ids(tok) -> dict:
    return {"bos_token_id": tok.bos_token_id, "eos_token_id": tok.eos_token_id,
            "pad_token_id": tok.pad_token_id}
