"""Hub uploads (hf_nlm.hub, `hf-nlm push`, model.push_to_hub, tokenizer.push_to_hub) against a local
stand-in for the Hub: a stdlib HTTP server on 127.0.0.1, started by the tests, that implements the calls
``huggingface_hub`` makes to create a repo and commit files (create repo, create branch, validate the
card's YAML, preupload, commit, and the HEAD / GET of a committed file) and records every commit. Nothing
leaves the machine.

conftest sets HF_HUB_OFFLINE=1 so that no test can reach the network; huggingface_hub then refuses every
request, the local one too. The ``hub`` fixture lifts that for these tests only, and points the
endpoint constants (what HF_ENDPOINT sets when huggingface_hub is imported) at the local server."""

from __future__ import annotations

import base64
import hashlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
from huggingface_hub import ModelCard
from huggingface_hub import constants as hub_constants
from huggingface_hub.repocard_data import model_index_to_eval_results

from hf_nlm import NPLMConfig, NPLMForCausalLM
from hf_nlm.hub.push import NO_TOKEN, HubError, push_run
from hf_nlm.tokenization import train_word_level_tokenizer
from hf_nlm_cli import main

TOKEN = "hf_local_test_token"


class FakeHub:
    """The state of the stand-in Hub: repos, their files per branch, and the commits received."""

    def __init__(self) -> None:
        self.repos: dict[str, dict] = {}  # repo_id -> {"private": ..., "branches": {name: {path: bytes}}}
        self.commits: list[dict] = []  # {"repo_id", "revision", "summary", "files": {path: bytes}}
        self.auth: set[str | None] = set()
        self.unknown: list[str] = []

    def files(self, repo_id: str, revision: str = "main") -> dict[str, bytes]:
        return self.repos[repo_id]["branches"][revision]


def _handler(hub: FakeHub, base_url: str):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:  # quiet
            pass

        def _body(self) -> bytes:
            return self.rfile.read(int(self.headers.get("Content-Length") or 0))

        def _send(self, status: int, payload=None, headers: dict | None = None,
                  body: bytes | None = None) -> None:
            data = body if body is not None else (json.dumps(payload).encode() if payload is not None
                                                  else b"")
            self.send_response(status)
            self.send_header("Content-Type",
                             "application/json" if body is None else "application/octet-stream")
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)

        def _resolve(self) -> None:
            # /{namespace}/{name}/resolve/{revision}/{path}
            parts = unquote(urlsplit(self.path).path).strip("/").split("/")
            repo_id, revision, path = "/".join(parts[:2]), parts[3], "/".join(parts[4:])
            content = hub.repos.get(repo_id, {}).get("branches", {}).get(revision, {}).get(path)
            if content is None:
                self._send(404, {"error": "Entry not found"}, {"X-Error-Code": "EntryNotFound"})
                return
            etag = hashlib.sha1(b"blob %d\0" % len(content) + content).hexdigest()
            self._send(200, headers={"ETag": f'"{etag}"', "X-Repo-Commit": "0" * 40}, body=content)

        def do_HEAD(self) -> None:
            # huggingface_hub's best-effort user-agent lookup
            if self.path.startswith("/api/agent-harnesses"):
                self._send(404, {"error": "not here"})
                return
            hub.auth.add(self.headers.get("Authorization"))
            if "/resolve/" in self.path:
                self._resolve()
            else:
                hub.unknown.append(f"HEAD {self.path}")
                self._send(404, {"error": "not implemented"})

        def do_GET(self) -> None:
            self.do_HEAD()

        def do_POST(self) -> None:
            hub.auth.add(self.headers.get("Authorization"))
            path = unquote(urlsplit(self.path).path)
            body = self._body()
            parts = path.strip("/").split("/")
            if path == "/api/repos/create":
                request = json.loads(body)
                repo_id = (f"{request['organization']}/{request['name']}" if request.get("organization")
                           else request["name"])
                repo = hub.repos.setdefault(repo_id, {"branches": {"main": {}}})
                repo["private"] = request.get("visibility") == "private" or request.get("private") is True
                self._send(200, {"url": f"{base_url}/{repo_id}", "name": repo_id})
            elif path == "/api/validate-yaml":
                self._send(200, {"errors": [], "warnings": []})
            elif parts[:2] == ["api", "models"] and len(parts) >= 6:
                repo_id, action, revision = "/".join(parts[2:4]), parts[4], "/".join(parts[5:])
                if repo_id not in hub.repos:
                    self._send(404, {"error": "Repository not found"}, {"X-Error-Code": "RepoNotFound"})
                elif action == "branch":
                    branches = hub.repos[repo_id]["branches"]
                    branches.setdefault(revision, dict(branches["main"]))
                    self._send(200, {})
                elif action == "preupload":
                    files = json.loads(body)["files"]
                    self._send(200, {"files": [{"path": f["path"], "uploadMode": "regular",
                                                "shouldIgnore": False} for f in files]})
                elif action == "commit":
                    lines = [json.loads(line) for line in body.decode().splitlines() if line.strip()]
                    header = next(item["value"] for item in lines if item["key"] == "header")
                    files = {item["value"]["path"]: base64.b64decode(item["value"]["content"])
                             for item in lines if item["key"] == "file"}
                    if revision not in hub.repos[repo_id]["branches"]:
                        self._send(404, {"error": "Revision not found"}, {"X-Error-Code": "RevisionNotFound"})
                        return
                    hub.repos[repo_id]["branches"][revision].update(files)
                    hub.commits.append({"repo_id": repo_id, "revision": revision,
                                        "summary": header["summary"], "files": files})
                    oid = hashlib.sha1(str(len(hub.commits)).encode()).hexdigest()
                    self._send(200, {"commitUrl": f"{base_url}/{repo_id}/commit/{oid}", "commitOid": oid,
                                     "pullRequestUrl": None})
                else:
                    hub.unknown.append(f"POST {path}")
                    self._send(404, {"error": "not implemented"})
            else:
                hub.unknown.append(f"POST {path}")
                self._send(404, {"error": "not implemented"})

    return Handler


@pytest.fixture
def hub(monkeypatch, tmp_path):
    import transformers.utils.hub as transformers_hub

    state = FakeHub()
    server = ThreadingHTTPServer(("127.0.0.1", 0), None)
    url = f"http://127.0.0.1:{server.server_address[1]}"
    server.RequestHandlerClass = _handler(state, url)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    # Only 127.0.0.1 is reachable from here: lift conftest's offline mode for these tests.
    monkeypatch.setattr(hub_constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(hub_constants, "ENDPOINT", url)
    monkeypatch.setattr(hub_constants, "HUGGINGFACE_CO_URL_TEMPLATE",
                        url + "/{repo_id}/resolve/{revision}/{filename}")
    monkeypatch.setattr(hub_constants, "HF_HUB_CACHE", str(tmp_path / "hub-cache"))
    monkeypatch.setattr(hub_constants, "AGENT_HARNESSES_PATH", str(tmp_path / "agent-harnesses.json"))
    # transformers' shared HfApi, rebuilt on the new endpoint
    monkeypatch.setattr(transformers_hub, "_hf_api", None)
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    yield state
    server.shutdown()
    server.server_close()
    assert not state.unknown, f"calls the stand-in Hub does not implement: {state.unknown}"


@pytest.fixture
def no_token(monkeypatch, tmp_path):
    for name in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(hub_constants, "HF_TOKEN_PATH", str(tmp_path / "no-token"))
    monkeypatch.setattr(hub_constants, "HF_STORED_TOKENS_PATH", str(tmp_path / "no-stored-tokens"))


@pytest.fixture
def run_dir(tiny_run) -> Path:
    return tiny_run


def test_push_run_commits_the_run_files_and_its_card(hub, run_dir):
    results = json.loads((run_dir / "results.json").read_text())
    info = push_run(run_dir, "someone/nplm-toy", private=True, commit_message="first upload")

    assert [c["summary"] for c in hub.commits] == ["first upload"]
    committed = hub.commits[0]["files"]
    assert set(committed) == {"config.json", "generation_config.json", "model.safetensors", "tokenizer.json",
                              "tokenizer_config.json", "README.md", "results.json", "curves.png",
                              "hf_nlm_model.py", "hf_nlm_tokenizer.py"}  # the code files of the auto_maps
    for name in set(committed) - {"README.md"}:  # byte for byte what the run folder holds
        assert committed[name] == (run_dir / name).read_bytes(), name
    assert hub.repos["someone/nplm-toy"]["private"] is True
    assert hub.auth == {f"Bearer {TOKEN}"}
    assert info.commit_url.startswith(hub_constants.ENDPOINT + "/someone/nplm-toy/commit/")

    card = ModelCard(committed["README.md"].decode())
    assert card.data.license == "apache-2.0" and card.data.library_name == "transformers"
    assert "datasets" not in card.data.to_dict()  # local files: no Hub dataset
    _, evals = model_index_to_eval_results(card.data.to_dict()["model-index"])
    assert ({e.dataset_split: e.metric_value for e in evals}
            == {s: results[s]["perplexity"] for s in ("validation", "test")})
    # The uploaded card loads the model from the repo, not from a local folder.
    assert 'from_pretrained("someone/nplm-toy")' in card.content and "path/to/this/folder" not in card.content


def test_cli_push_to_a_branch(hub, run_dir, capsys):
    assert main(["push", str(run_dir), "--repo-id", "someone/nplm-toy", "--revision", "v1",
                 "--commit-message", "to v1"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert (printed["repo_id"] == "someone/nplm-toy"
            and printed["commit_url"].startswith(hub_constants.ENDPOINT))
    assert [(c["revision"], c["summary"]) for c in hub.commits] == [("v1", "to v1")]
    assert ("model.safetensors" in hub.files("someone/nplm-toy", "v1")
            and not hub.files("someone/nplm-toy", "main"))


def test_model_and_tokenizer_push_to_hub_carry_the_package_card(hub, toy_texts):
    tokenizer = train_word_level_tokenizer(toy_texts)
    model = NPLMForCausalLM(NPLMConfig(vocab_size=len(tokenizer), context_size=2, embedding_size=4,
                                       hidden_size=4, eos_token_id=tokenizer.eos_token_id,
                                       bos_token_id=tokenizer.eos_token_id,
                                       pad_token_id=tokenizer.pad_token_id))
    model.push_to_hub("someone/nplm-tiny", commit_message="model", tags=["toy"])
    tokenizer.push_to_hub("someone/nplm-tiny", commit_message="tokenizer")

    assert [c["summary"] for c in hub.commits] == ["model", "tokenizer"]
    assert {"config.json", "model.safetensors", "README.md"} <= set(hub.commits[0]["files"])
    assert "tokenizer.json" in hub.commits[1]["files"]
    card = ModelCard(hub.files("someone/nplm-tiny")["README.md"].decode())
    # Our card (transformers' push would upload its generic template), kept by the tokenizer's push.
    assert card.data.tags[:2] == ["hf-nlm", "nplm"] and "toy" in card.data.tags
    assert card.data.pipeline_tag == "text-generation" and card.data.license == "apache-2.0"
    assert "Bengio" in card.content

    # A second push keeps the card the repo already has, as transformers does.
    hub.repos["someone/nplm-tiny"]["branches"]["main"]["README.md"] = b"---\nlicense: mit\n---\nedited\n"
    model.push_to_hub("someone/nplm-tiny", commit_message="again")
    assert "README.md" not in hub.commits[-1]["files"]
    assert hub.files("someone/nplm-tiny")["README.md"].endswith(b"edited\n")


def test_no_token_is_a_clear_error(no_token, run_dir, capsys, monkeypatch):
    monkeypatch.setattr(hub_constants, "HF_HUB_OFFLINE", False)
    with pytest.raises(HubError, match="huggingface-cli login"):
        push_run(run_dir, "someone/x")
    with pytest.raises(SystemExit) as exit_info:
        main(["push", str(run_dir), "--repo-id", "someone/x"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "HF_TOKEN" in err and "huggingface-cli login" in err
    assert "HF_TOKEN" in NO_TOKEN


def test_network_failure_and_offline_mode_are_clear_errors(run_dir, capsys, monkeypatch):
    import socket

    monkeypatch.setenv("HF_TOKEN", TOKEN)
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}"
    monkeypatch.setattr(hub_constants, "HF_HUB_OFFLINE", False)
    with pytest.raises(HubError, match="cannot reach the Hub at " + dead):
        push_run(run_dir, "someone/x", endpoint=dead)
    monkeypatch.setattr(hub_constants, "ENDPOINT", dead)
    with pytest.raises(SystemExit) as exit_info:
        main(["push", str(run_dir), "--repo-id", "someone/x"])
    assert exit_info.value.code == 2 and "cannot reach the Hub" in capsys.readouterr().err

    monkeypatch.setattr(hub_constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(HubError, match="HF_HUB_OFFLINE"):
        push_run(run_dir, "someone/x", endpoint=dead)
