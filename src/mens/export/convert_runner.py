"""Runs one of llama.cpp's converter scripts in this (child) process:

    python -m mens.export.convert_runner CONVERTER_DIR SCRIPT [--pre NAME] [--no-mtp] -- ARGS…

The workarounds, kept here alone. First: the converter names a BPE tokenizer's pre-tokenizer by a
fingerprint of how it encodes a fixed text, so any vocabulary it has not seen (one trained by
mens, a user's own) stops the conversion even when its pre-tokenizer is exactly GPT-2's. With
`--pre NAME` (mens passes `gpt-2` only after reading tokenizer.json: a lone ByteLevel with
GPT-2's regex), `TextModel.get_vocab_base_pre` still runs first and wins; only when it raises
NotImplementedError is NAME used. Second, `--no-mtp`: transformers drops a model's multi-token
prediction weights when it loads it (Qwen3.5's and Qwen3-Next's `mtp.*`), so a model mens merged
never has them, while the converter expects them wherever the config or its class says the
family has them (an AssertionError). Its own `--no-mtp` flag refuses the families without MTP,
so the runner sets the class default that flag sets (`ModelBase.no_mtp`, read only by the
families that export MTP). tests/export/test_convert_runner.py fails if the converter stops
having either.

A converter failure prints one `mens-convert-error: …` line and exits 3. (Whether the converter
has a class for a family at all is read from its table without running it: gguf.check_converts.)
"""

from __future__ import annotations

import sys


def wrap_pre_tokenizer(name: str) -> None:
    from conversion import base

    original = base.TextModel.get_vocab_base_pre

    def get_vocab_base_pre(self, tokenizer) -> str:
        try:
            return original(self, tokenizer)
        except NotImplementedError:
            return name

    base.TextModel.get_vocab_base_pre = get_vocab_base_pre


def no_mtp() -> None:
    from conversion import base

    base.ModelBase.no_mtp = True


def main(argv: list[str]) -> int:
    conv_dir, script, rest = argv[0], argv[1], argv[2:]
    pre, without_mtp = None, False
    if rest[:1] == ["--pre"]:
        pre, rest = rest[1], rest[2:]
    if rest[:1] == ["--no-mtp"]:
        without_mtp, rest = True, rest[1:]
    if rest[:1] == ["--"]:
        rest = rest[1:]
    import os
    import runpy

    sys.path.insert(0, conv_dir)
    if "NO_LOCAL_GGUF" not in os.environ:  # the converter's own gguf-py first, as the script itself does
        sys.path.insert(1, os.path.join(conv_dir, "gguf-py"))
    sys.argv = [os.path.join(conv_dir, script), *rest]
    try:
        if pre:
            wrap_pre_tokenizer(pre)
        if without_mtp:
            no_mtp()
        runpy.run_path(sys.argv[0], run_name="__main__")
    except (NotImplementedError, ValueError, KeyError, AssertionError, FileNotFoundError) as exc:
        print(f"mens-convert-error: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}",
              file=sys.stderr)
        return 3
    except SystemExit as exc:
        if exc.code not in (0, None):
            print(f"mens-convert-error: the converter exited with {exc.code}", file=sys.stderr)
            return 3
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
