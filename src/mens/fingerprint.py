"""Fingerprints: what a stage's output depends on, so a rerun can skip work whose inputs are unchanged.

    file_hash(path) -> str                 text_hash(bytes | str) -> str
    input_hashes(paths, content_limit=None) -> {path: hash}
    fingerprint_block(inputs, params, packs, code=None) -> dict   # {inputs, params, packs, [code,] digest}
    stage_fingerprint(inputs, params, packs) -> str                # the block's digest

One module for both users: each corpus stage writes a block into its report (extract also reads
its previous one back for --incremental), and `mens pipeline` keeps one per stage in
pipeline_state.json to decide what to skip. A block covers the content of every input file, the
stage's parameters, each language pack's `fingerprint()` (grammar version plus the pack's own
source, so a grammar change forces re-extraction) and, for the pipeline, the source of the mens
packages that make the stage's outputs (so new mens code re-runs the stages built from it).
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
from pathlib import Path
from typing import Any, Iterable

from mens.lang.base import LanguagePack

_CHUNK = 1 << 20
# Above this size the pipeline fingerprints a file by size and mtime, not content: hashing a
# multi-GB base model on every pipeline run would cost more than most stages.
CONTENT_HASH_LIMIT = 64 << 20


def file_hash(path: str | Path) -> str:
    """sha256 of a file's bytes (hex, first 16 characters are plenty for change detection)."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()[:16]


def text_hash(data: bytes | str) -> str:
    if isinstance(data, str):
        data = data.encode("utf-8")
    return hashlib.sha256(data).hexdigest()[:16]


def _file_signature(path: Path, content_limit: int | None) -> str:
    if content_limit is not None:
        st = path.stat()
        if st.st_size > content_limit:
            return f"size={st.st_size},mtime={st.st_mtime_ns}"
    return file_hash(path)


def input_hashes(inputs: Iterable[str | Path], content_limit: int | None = None) -> dict[str, str]:
    """Each input file (directories walked, dot-files skipped) → its hash, keyed by path, in a
    stable order; "missing" for a path that does not exist. Files over `content_limit` bytes
    (when given) are signed by size and mtime instead of content."""
    out: dict[str, str] = {}
    for item in inputs:
        path = Path(item)
        if path.is_dir():
            for f in sorted(p for p in path.rglob("*") if p.is_file() and not _hidden(p, path)):
                out[str(f)] = _file_signature(f, content_limit)
        elif path.is_file():
            out[str(path)] = _file_signature(path, content_limit)
        else:
            out[str(path)] = "missing"
    return out


def _hidden(path: Path, root: Path) -> bool:
    return any(part.startswith(".") for part in path.relative_to(root).parts)


def pack_fingerprints(packs: Iterable[LanguagePack | str]) -> dict[str, str]:
    """Pack name → its fingerprint; packs are given as objects or by registry name."""
    from mens.lang import get_pack

    resolved = [get_pack(p) if isinstance(p, str) else p for p in packs]
    return {p.name: p.fingerprint() for p in resolved}


@functools.lru_cache(maxsize=None)
def source_digest(package: str) -> str:
    """Digest of a mens package's (or module's) Python sources, by relative path and content."""
    spec = importlib.util.find_spec(package)
    if spec is None:
        return "missing"
    roots = [Path(p) for p in (spec.submodule_search_locations or [])]
    files = sorted(f for r in roots for f in r.rglob("*.py")) if roots else [Path(spec.origin)]
    h = hashlib.sha256()
    for f in files:
        rel = f.relative_to(roots[0]) if roots else Path(f.name)
        h.update(str(rel).encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def code_digests(packages: Iterable[str]) -> dict[str, str]:
    # Looked up through the module global on each call, so a test can stand in for one package.
    return {name: source_digest(name) for name in packages}


def fingerprint_block(inputs: Iterable[str | Path] | dict[str, str], params: dict[str, Any],
                      packs: Iterable[LanguagePack | str] = (), *,
                      code: Iterable[str] | None = None) -> dict[str, Any]:
    """`inputs` are paths to hash, or an already computed {path: hash} mapping. The `code` key is
    present only when `code` is given (extract's report has it, for --incremental; the other
    corpus reports leave it out)."""
    block: dict[str, Any] = {
        "inputs": dict(inputs) if isinstance(inputs, dict) else input_hashes(inputs),
        "params": params,
        "packs": pack_fingerprints(packs),
    }
    if code is not None:
        block["code"] = code_digests(code)
    block["digest"] = _digest(block)
    return block


def stage_fingerprint(inputs: Iterable[str | Path], params: dict[str, Any],
                      packs: Iterable[LanguagePack | str] = ()) -> str:
    """One digest over input contents, parameters and pack fingerprints."""
    return fingerprint_block(inputs, params, packs)["digest"]


def _digest(block: dict[str, Any]) -> str:
    body = {k: v for k, v in block.items() if k != "digest"}
    return hashlib.sha256(json.dumps(body, sort_keys=True, default=str).encode()).hexdigest()[:16]
