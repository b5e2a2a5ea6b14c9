"""Lengths against a model's positions, checked before the model loads.

A sequence longer than a model's position table is an `IndexError` deep in the position
embedding (GPT-2's learned table) after minutes of loading and sampling, or quietly worse output
(rotary positions past what the model was trained on). Every command that feeds a model a
sequence checks it first, from the model's config.json and its tokenizer, and a sequence beyond
the table is a one-line error naming the flag to change:

  mens train   --seq-len (a model's or --scratch-positions), --bench-max-new-tokens with the bench's prompts
  mens bench   --max-new-tokens with the bench's prompts
  mens corpus prefs  --max-new-tokens with --prompts
  mens rl      --max-new-tokens with the prompts (GRPO samples every prompt whole, never cut)
  mens dpo     --seq-len (prompt + answer tokens kept)
  mens serve   --max-prompt-tokens (a request's prompt + max_tokens is checked before it is queued)
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

from mens.errors import MensError


def source_positions(source: str | Path) -> int | None:
    """The positions of what `--model` names (a model dir, a run dir with weights, an adapter
    run's base, a hub id in the cache), read from its config; None when it cannot be read here
    (the loader then says what is wrong)."""
    from mens.hf import adapter_base, is_adapter_run, max_positions

    source = str(source)
    if is_adapter_run(source) and not (Path(source) / "config.json").is_file():
        source = adapter_base(source)
    try:
        from transformers import AutoConfig

        return max_positions(AutoConfig.from_pretrained(source))
    except (OSError, ValueError, KeyError):
        return None


def source_tokenizer(source: str | Path):
    """The tokenizer generation uses for `source`: a run's own, else its base's (as
    mens.inference.load_model picks it)."""
    from mens.hf import adapter_base, is_adapter_run, load_tokenizer

    source = str(source)
    base = adapter_base(source) if is_adapter_run(source) else source
    return load_tokenizer(*([source] if Path(source).is_dir() else []), base)


def check_length(length: int, positions: int | None, flag: str, where: str) -> None:
    """A whole sequence of `length` tokens (`flag`'s value) fits the model's positions."""
    if positions is not None and length > positions:
        raise MensError(f"{flag} {length} is beyond the model's {positions} positions", where,
                        f"pass {flag} {positions} or less")


def check_generation_fits(tokenizer, prompts: Iterable[str], *, positions: int | None, new_tokens: int, flag: str,
                          where: str, system: str | None = None) -> None:
    """Every prompt, in the chat format generation writes it, plus `new_tokens` (`flag`'s value)
    fits the model's positions; the error names the longest prompt and the largest value that fits."""
    from mens.chat_template import chat_prompt

    if positions is None:
        return
    if new_tokens >= positions:
        raise MensError(f"{flag} {new_tokens} leaves no room for a prompt in the model's {positions} positions",
                        where, f"pass {flag} {positions // 2} or less")
    texts = [chat_prompt(tokenizer, p, system) for p in prompts]
    if not texts:
        return
    lengths = [len(ids) for ids in tokenizer(texts, add_special_tokens=False)["input_ids"]]
    longest = max(range(len(lengths)), key=lengths.__getitem__)
    if lengths[longest] + new_tokens > positions:
        room = positions - lengths[longest]
        fix = f"pass {flag} {room} or less, or shorten that prompt" if room > 0 else "shorten that prompt"
        raise MensError(f"prompt {longest + 1} is {lengths[longest]} tokens, and {flag} {new_tokens} more make "
                        f"{lengths[longest] + new_tokens}, beyond the model's {positions} positions", where, fix)
