"""Uploads to the Hugging Face Hub with ``huggingface_hub``.

* :func:`push_run`: a training run's folder (``hf-nlm push RUN_DIR --repo-id NAME``): the model, its
  tokenizer and generation config, the card (``README.md``, written first if the folder has none),
  ``results.json`` and ``curves.png``; never the checkpoints or the log.
* :func:`push_model`: what ``model.push_to_hub`` of every hf_nlm model does: ``save_pretrained`` into a
  temporary folder (with its card) and upload that.

Every Hub or network failure is raised as :class:`HubError` with what to do about it.
"""

from __future__ import annotations

import fnmatch
import os
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from ..remote_code import CODE_FILES
from ..saved_files import check_model_folder
from .model_card import CARD_NAME, RESULTS_NAME, CorpusCard, named_corpus, write_run_card

# The files of a run folder that are uploaded (top level only): the model, tokenizer, generation config,
# the code files their auto_maps name (loading without `import hf_nlm`), card, results, curves and a
# build-tree run's word tree. Checkpoints, best_model/ and log.jsonl stay local.
RUN_FILE_PATTERNS = (
    "config.json", "generation_config.json", "model.safetensors", "model-*-of-*.safetensors",
    "model.safetensors.index.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
    "vocab.json", "vocab.txt", "merges.txt", "added_tokens.json", "chat_template.jinja", *CODE_FILES,
    CARD_NAME, RESULTS_NAME, "curves.png", "word_tree.json",
)
LOAD_PLACEHOLDER = "path/to/this/folder"  # what the card's "How to load" names until the model has a repo id
NO_TOKEN = (
    "no Hugging Face token: log in with `hf auth login` (`huggingface-cli login` with older "
    "huggingface_hub), set the HF_TOKEN environment variable, or pass token=..."
)


class HubError(RuntimeError):
    """An upload failed: no token, no network, offline mode, or the Hub refused it."""


def run_files(run_dir: str | os.PathLike) -> list[Path]:
    """The files of ``run_dir`` that :func:`push_run` uploads (sorted by name)."""
    folder = Path(run_dir)
    return sorted(p for p in folder.iterdir()
                  if p.is_file() and any(fnmatch.fnmatchcase(p.name, pat) for pat in RUN_FILE_PATTERNS))


def _token(token: str | None) -> str:
    from huggingface_hub import get_token

    token = token or get_token()
    if not token:
        raise HubError(NO_TOKEN)
    return token


def _network_errors() -> tuple[type[BaseException], ...]:
    """Connection failures of the HTTP client huggingface_hub uses (httpx2, httpx or requests by version)."""
    errors: list[type[BaseException]] = [OSError]
    for module, name in (("httpx2", "TransportError"), ("httpx", "TransportError"),
                         ("requests", "ConnectionError")):
        error = getattr(sys.modules.get(module), name, None)
        if isinstance(error, type) and issubclass(error, BaseException):
            errors.append(error)
    return tuple(errors)


def _card_bytes(path: Path, repo_id: str) -> bytes:
    """The card as uploaded: its "How to load" names the repo instead of a local folder."""
    return path.read_text(encoding="utf-8").replace(LOAD_PLACEHOLDER, repo_id).encode("utf-8")


def upload_files(
    files: Sequence[Path],
    repo_id: str,
    *,
    private: bool | None = None,
    revision: str | None = None,
    commit_message: str | None = None,
    commit_description: str | None = None,
    create_pr: bool = False,
    token: str | None = None,
    endpoint: str | None = None,
    keep_remote_card: bool = False,
):
    """Create ``repo_id`` if needed (and the branch ``revision``) and commit ``files`` (by file name) in
    one commit. ``keep_remote_card``: leave a ``README.md`` already in the repo as it is (as transformers'
    ``push_to_hub`` does) instead of uploading ours. Returns ``huggingface_hub``'s ``CommitInfo``."""
    from huggingface_hub import CommitOperationAdd, HfApi
    from huggingface_hub.errors import HfHubHTTPError, OfflineModeIsEnabled

    api = HfApi(endpoint=endpoint, token=_token(token))
    try:
        repo_id = api.create_repo(repo_id, private=private, exist_ok=True).repo_id
        if revision is not None and not revision.startswith("refs/pr"):
            api.create_branch(repo_id, branch=revision, exist_ok=True)
        skip_card = keep_remote_card and api.file_exists(repo_id, CARD_NAME, revision=revision)
        operations = [
            CommitOperationAdd(path_in_repo=p.name,
                               path_or_fileobj=_card_bytes(p, repo_id) if p.name == CARD_NAME else str(p))
            for p in files if not (skip_card and p.name == CARD_NAME)
        ]
        return api.create_commit(
            repo_id, operations, commit_message=commit_message or "Upload model with hf-nlm",
            commit_description=commit_description, revision=revision, create_pr=create_pr,
        )
    except OfflineModeIsEnabled as err:
        raise HubError(f"cannot upload to {api.endpoint}: HF_HUB_OFFLINE is set "
                       "(unset it to upload)") from err
    except HfHubHTTPError as err:
        status = err.response.status_code if err.response is not None else None
        hint = " (is the token valid and allowed to write to this repo?)" if status in (401, 403) else ""
        raise HubError(f"the Hub refused the upload to {repo_id}{hint}: {err}") from err
    except _network_errors() as err:
        raise HubError(f"cannot reach the Hub at {api.endpoint} (network down, or a wrong HF_ENDPOINT?): "
                       f"{err}") from err


def push_run(
    run_dir: str | os.PathLike,
    repo_id: str,
    *,
    private: bool | None = None,
    revision: str | None = None,
    commit_message: str | None = None,
    token: str | None = None,
    endpoint: str | None = None,
    corpus_card: Callable[[str], CorpusCard | None] = named_corpus,
):
    """Upload a training run's folder (:data:`RUN_FILE_PATTERNS`) to ``repo_id``; a folder without a card
    gets one first (:func:`hf_nlm.hub.model_card.write_run_card`, with ``corpus_card``). Returns the
    ``CommitInfo``. Raises FileNotFoundError for a folder that is not a saved model, :class:`HubError` on Hub
    failures."""
    folder = Path(run_dir)
    check_model_folder(folder)
    _token(token)  # fail before writing anything when there is no token
    if not (folder / CARD_NAME).is_file():
        write_run_card(folder, corpus_card=corpus_card)
    return upload_files(run_files(folder), repo_id, private=private, revision=revision,
                        commit_message=commit_message, token=token, endpoint=endpoint)


def push_model(
    model,
    repo_id: str,
    *,
    commit_message: str | None = None,
    commit_description: str | None = None,
    private: bool | None = None,
    token: str | None = None,
    revision: str | None = None,
    create_pr: bool = False,
    max_shard_size: int | str | None = "50GB",
    tags: list[str] | None = None,
    endpoint: str | None = None,
):
    """``model.push_to_hub``: ``save_pretrained`` (weights, config, generation config, card) into a
    temporary folder and upload it. A card already in the repo is kept, as transformers does; ``tags``
    are added to a card we upload."""
    _token(token)
    tags = [*(getattr(model, "model_tags", None) or []), *(tags or [])]
    with tempfile.TemporaryDirectory() as tmp:
        model.save_pretrained(tmp, max_shard_size=max_shard_size)
        card = Path(tmp) / CARD_NAME
        if tags and card.is_file():
            from huggingface_hub import ModelCard

            loaded = ModelCard.load(card)
            loaded.data.tags = list(dict.fromkeys([*(loaded.data.tags or []), *tags]))
            loaded.save(card)
        files = sorted(p for p in Path(tmp).iterdir() if p.is_file())
        return upload_files(files, repo_id, private=private, revision=revision, commit_message=commit_message,
                            commit_description=commit_description, create_pr=create_pr, token=token,
                            endpoint=endpoint, keep_remote_card=True)
