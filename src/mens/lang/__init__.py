"""Language packs, by name and file extension.

Built-in packs are imported only when first asked for, so the CLI starts fast. Any other name is
tried as a tree-sitter grammar from `tree-sitter-language-pack` (`--lang rust`).
"""

from __future__ import annotations

import importlib
from pathlib import Path

from mens.errors import MensError
from mens.lang.base import Analysis, Construct, Diagnostic, LanguagePack, Span, extract_code

__all__ = ["Analysis", "Construct", "Diagnostic", "LanguagePack", "Span", "extract_code",
           "get_pack", "loadable_pack", "pack_for_path", "pack_for_fence", "builtin_names", "default_packs"]

# name -> "module:Class", extensions, fence tags. Kept here (not in the modules) so lookups by
# extension need no import.
_BUILTIN: dict[str, tuple[str, tuple[str, ...], tuple[str, ...]]] = {
    "vox": ("mens.lang.vox:VoxPack", (".vox",), ("vox",)),
    "python": ("mens.lang.python:PythonPack", (".py",), ("python", "py", "python3")),
}
_CACHE: dict[str, LanguagePack] = {}


def builtin_names() -> list[str]:
    return list(_BUILTIN)


def get_pack(name: str) -> LanguagePack:
    """The pack called `name`: a built-in one, or a tree-sitter grammar of that name."""
    name = name.lower()
    if name in _CACHE:
        return _CACHE[name]
    if name in _BUILTIN:
        module, cls = _BUILTIN[name][0].split(":")
        pack = getattr(importlib.import_module(module), cls)()
    else:
        try:
            from mens.lang.treesitter import TreeSitterPack
        except ImportError:
            raise MensError(f"unknown language pack {name!r}", "--lang",
                            f"use one of {', '.join(_BUILTIN)} or a tree-sitter grammar name") from None
        pack = TreeSitterPack(name)  # raises MensError for an unknown grammar
    _CACHE[name] = pack
    return pack


def loadable_pack(name: str) -> LanguagePack | None:
    """The pack called `name`, or None where there is none: a grammar nobody ships, a pack whose
    module is not installed (what a row's `lang` may name; its stage drops or skips the row)."""
    try:
        return get_pack(name)
    except (MensError, ImportError, AttributeError):
        return None


def default_packs(extra: list[str] | tuple[str, ...] = ()) -> list[LanguagePack]:
    """The built-in packs plus any named extras (tree-sitter grammars)."""
    names = list(_BUILTIN) + [n for n in extra if n not in _BUILTIN]
    return [get_pack(n) for n in names]


def pack_for_path(path: str | Path, packs: list[LanguagePack] | None = None) -> LanguagePack | None:
    suffix = Path(path).suffix.lower()
    if packs is not None:
        return next((p for p in packs if suffix in p.extensions), None)
    for name, (_, exts, _) in _BUILTIN.items():
        if suffix in exts:
            return get_pack(name)
    return None


def pack_for_fence(tag: str | None, packs: list[LanguagePack] | None = None) -> LanguagePack | None:
    if not tag:
        return None
    tag = tag.lower()
    if packs is not None:
        return next((p for p in packs if tag in p.fence_tags or tag == p.name), None)
    for name, (_, _, tags) in _BUILTIN.items():
        if tag in tags or tag == name:
            return get_pack(name)
    return None
