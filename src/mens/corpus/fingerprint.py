"""Fingerprints: what a stage's output depends on, so `mens pipeline` can skip unchanged stages.

    file_hash(path) -> str
    fingerprint_block(inputs, params, packs) -> dict   # the report's `fingerprint` block
    stage_fingerprint(inputs, params, packs) -> str     # one digest of that block

A fingerprint covers the content of every input file, the stage's parameters, and each language
pack's `fingerprint()` (grammar version plus the pack's own source), so a grammar change forces
re-extraction.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Iterable

from mens.lang.base import LanguagePack

_CHUNK = 1 << 20


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


def _input_hashes(inputs: Iterable[str | Path]) -> dict[str, str]:
    """Each input file (directories are walked) → its hash, keyed by path, in a stable order."""
    out: dict[str, str] = {}
    for item in inputs:
        path = Path(item)
        if path.is_dir():
            for f in sorted(p for p in path.rglob("*") if p.is_file() and not _hidden(p, path)):
                out[str(f)] = file_hash(f)
        elif path.is_file():
            out[str(path)] = file_hash(path)
        else:
            out[str(path)] = "missing"
    return out


def _hidden(path: Path, root: Path) -> bool:
    return any(part.startswith(".") for part in path.relative_to(root).parts)


def fingerprint_block(inputs: Iterable[str | Path] | dict[str, str], params: dict[str, Any],
                      packs: Iterable[LanguagePack] = ()) -> dict[str, Any]:
    """`inputs` are paths to hash, or an already computed {path: hash} mapping."""
    block = {
        "inputs": dict(inputs) if isinstance(inputs, dict) else _input_hashes(inputs),
        "params": params,
        "packs": {p.name: p.fingerprint() for p in packs},
    }
    block["digest"] = _digest(block)
    return block


def stage_fingerprint(inputs: Iterable[str | Path], params: dict[str, Any],
                      packs: Iterable[LanguagePack] = ()) -> str:
    """One digest over input contents, parameters and pack fingerprints."""
    return fingerprint_block(inputs, params, packs)["digest"]


def _digest(block: dict[str, Any]) -> str:
    body = {k: v for k, v in block.items() if k != "digest"}
    return hashlib.sha256(json.dumps(body, sort_keys=True, default=str).encode()).hexdigest()[:16]
