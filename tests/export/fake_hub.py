"""A local stand-in for the Hugging Face Hub's upload API — a TEST FIXTURE, not a Hub.

It serves exactly what huggingface_hub (2.4, `HF_ENDPOINT=hub.url`, `HF_HUB_DISABLE_XET=1`) sends
for `HfApi.create_repo` + `HfApi.upload_folder`, i.e. what `mens push` does:

- POST /api/repos/create                             create_repo (409 when it exists; exist_ok)
- POST /api/validate-yaml                            create_commit checks README.md's metadata
- POST /api/models/{org}/{name}/preupload/{rev}      "regular" or "lfs" per file
- POST /{org}/{name}.git/info/lfs/objects/batch      LFS batch API, "basic" transfer
- PUT  /lfs/{oid}?sig=  POST /lfs/verify            the LFS upload (pre-signed URL) and its verify
- POST /api/models/{org}/{name}/commit/{rev}         the NDJSON commit (header, file, lfsFile)

Committed files are written under `root/<org>/<name>/`. Every request must carry
`Authorization: Bearer <token>` (else 401, as the Hub answers a bad token); `fail` maps
endpoint names ("create", "preupload", "lfs", "commit") to an error status they answer instead;
any other route is a 404 recorded in `unknown`.
Xet uploads (huggingface_hub's default when hf_xet is installed) are not served: the client
falls back to the LFS protocol when HF_HUB_DISABLE_XET=1.
"""

from __future__ import annotations

import base64
import hashlib
import json
import socket
import threading
import time
from pathlib import Path, PurePosixPath

import yaml
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

TOKEN = "hf_fake_test_token"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _error(status: int, message: str) -> JSONResponse:
    # huggingface_hub shows X-Error-Message (or the JSON "error") in its HfHubHTTPError.
    return JSONResponse({"error": message}, status_code=status, headers={"X-Error-Message": message})


class FakeHub:
    def __init__(self, root: Path, token: str = TOKEN):
        self.root, self.token = Path(root), token
        self.repos: dict[str, dict] = {}      # repo id -> {"private": bool, "commits": [summary, ...]}
        self.lfs: dict[str, bytes] = {}       # oid -> content uploaded through LFS
        self.lfs_paths: list[str] = []        # paths committed as lfsFile
        self.unknown: list[str] = []          # requests no route here serves
        self.fail: dict[str, int] = {}        # endpoint name -> the error status it answers
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.app = self._build_app()

    # -- what tests read ------------------------------------------------------------------------
    def files(self, repo: str) -> dict[str, bytes]:
        base = self.root / repo
        return {str(p.relative_to(base)): p.read_bytes() for p in sorted(base.rglob("*")) if p.is_file()}

    def _sign(self, oid: str) -> str:
        return hashlib.sha256(f"{self.token}:{oid}".encode()).hexdigest()[:16]

    # -- the app --------------------------------------------------------------------------------
    def _build_app(self) -> FastAPI:
        app = FastAPI()

        @app.middleware("http")
        async def guard(request: Request, call_next):
            if request.url.path.startswith("/lfs/") and request.method == "PUT":
                pass  # a pre-signed storage URL, as the Hub's S3 ones: no token (checked below)
            elif request.headers.get("authorization") != f"Bearer {self.token}":
                return _error(401, "Invalid credentials in Authorization header")
            return await call_next(request)

        def checked(name: str, repo: str | None = None) -> JSONResponse | None:
            if name in self.fail:
                return _error(self.fail[name], f"fake hub: {name} failed on purpose")
            if repo is not None and repo not in self.repos:
                return JSONResponse({"error": "Repository not found"}, status_code=404,
                                    headers={"X-Error-Code": "RepoNotFound"})
            return None

        @app.post("/api/repos/create")
        async def create_repo(request: Request):
            body = await request.json()
            repo = f"{body['organization']}/{body['name']}"
            if err := checked("create"):
                return err
            if body.get("type", "model") != "model":
                return _error(400, "fake hub: model repos only")
            if repo in self.repos:  # the Hub's 409 names the repo's url too (create_repo(exist_ok=True) reads it)
                return JSONResponse({"error": "You already created this model repo", "url": f"{self.url}/{repo}"},
                                    status_code=409)
            self.repos[repo] = {"private": body.get("visibility") == "private", "commits": []}
            (self.root / repo).mkdir(parents=True)
            return {"url": f"{self.url}/{repo}", "name": repo, "id": repo}

        @app.post("/api/validate-yaml")
        async def validate_yaml(request: Request):
            content = (await request.json())["content"]
            if content.startswith("---\n"):
                try:
                    meta = yaml.safe_load(content.split("---\n")[1])
                except yaml.YAMLError as exc:
                    return JSONResponse({"errors": [{"message": str(exc)}]}, status_code=400)
                if not isinstance(meta, dict):
                    return JSONResponse({"errors": [{"message": "metadata is not a mapping"}]}, status_code=400)
            return {"errors": [], "warnings": []}

        @app.post("/api/models/{org}/{name}/preupload/{revision}")
        async def preupload(org: str, name: str, revision: str, request: Request):
            if err := checked("preupload", f"{org}/{name}"):
                return err
            files = (await request.json())["files"]
            return {"files": [{"path": f["path"], "shouldIgnore": False, "oid": None,
                               "uploadMode": "lfs" if f["path"].endswith(".safetensors") else "regular"}
                              for f in files]}

        @app.post("/{org}/{name}.git/info/lfs/objects/batch")
        async def lfs_batch(org: str, name: str, request: Request):
            if err := checked("lfs", f"{org}/{name}"):
                return err
            body = await request.json()
            objects = [{"oid": o["oid"], "size": o["size"], "authenticated": True,
                        "actions": None if o["oid"] in self.lfs else {
                            "upload": {"href": f"{self.url}/lfs/{o['oid']}?sig={self._sign(o['oid'])}"},
                            "verify": {"href": f"{self.url}/lfs/verify"}}}
                       for o in body["objects"]]
            for o in objects:
                if o["actions"] is None:
                    del o["actions"]
            return JSONResponse({"transfer": "basic", "objects": objects},
                                media_type="application/vnd.git-lfs+json")

        @app.put("/lfs/{oid}")
        async def lfs_put(oid: str, sig: str, request: Request):
            if sig != self._sign(oid):
                return _error(403, "fake hub: bad signature")
            data = await request.body()
            if hashlib.sha256(data).hexdigest() != oid:
                return _error(400, "fake hub: content does not match its oid")
            self.lfs[oid] = data
            return {}

        @app.post("/lfs/verify")
        async def lfs_verify(request: Request):
            body = await request.json()
            if body["oid"] not in self.lfs or len(self.lfs[body["oid"]]) != body["size"]:
                return _error(404, "fake hub: LFS object not uploaded")
            return {}

        @app.post("/api/models/{org}/{name}/commit/{revision}")
        async def commit(org: str, name: str, revision: str, request: Request):
            repo = f"{org}/{name}"
            if err := checked("commit", repo):
                return err
            if revision != "main":
                return _error(400, "fake hub: main branch only")
            lines = [json.loads(line) for line in (await request.body()).decode().splitlines() if line]
            if not lines or lines[0]["key"] != "header":
                return _error(400, "fake hub: commit payload without a header line")
            staged: dict[str, bytes] = {}
            for item in lines[1:]:
                value = item["value"]
                path = PurePosixPath(value["path"])
                if path.is_absolute() or ".." in path.parts:
                    return _error(400, f"fake hub: bad path {value['path']!r}")
                if item["key"] == "file" and value.get("encoding") == "base64":
                    staged[str(path)] = base64.b64decode(value["content"])
                elif item["key"] == "lfsFile" and len(self.lfs.get(value["oid"], b"")) == value["size"]:
                    staged[str(path)] = self.lfs[value["oid"]]
                    self.lfs_paths.append(str(path))
                else:
                    return _error(400, f"fake hub: cannot commit {item['key']} {value['path']!r}")
            for path, data in staged.items():
                (self.root / repo / path).parent.mkdir(parents=True, exist_ok=True)
                (self.root / repo / path).write_bytes(data)
            self.repos[repo]["commits"].append(lines[0]["value"]["summary"])
            oid = hashlib.sha1(json.dumps(lines).encode()).hexdigest()
            return {"commitUrl": f"{self.url}/{repo}/commit/{oid}", "commitOid": oid, "pullRequestUrl": None}

        @app.api_route("/{rest:path}", methods=["GET", "POST", "PUT", "DELETE", "HEAD", "PATCH"])
        async def anything_else(rest: str, request: Request):
            self.unknown.append(f"{request.method} /{rest}")
            return _error(404, "fake hub: not served")

        return app

    # -- lifetime -------------------------------------------------------------------------------
    def __enter__(self) -> FakeHub:
        import uvicorn

        self.server = uvicorn.Server(uvicorn.Config(self.app, host="127.0.0.1", port=self.port, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.time() + 20
        while not self.server.started:
            assert time.time() < deadline, "fake hub did not start"
            time.sleep(0.05)
        return self

    def __exit__(self, *exc) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
