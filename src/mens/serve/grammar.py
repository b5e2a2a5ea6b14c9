"""Grammar-constrained decoding through a language pack's incremental check.

At each step the engine offers candidate tokens in probability order (the sampled one first);
`Constraint.allows` accepts the first whose appended text keeps the code a *viable prefix* —
it parses, or its only error is that the input ended early (`LanguagePack.viable_prefix`). An
end token, or a closing fence, is accepted only when the code parses completely. So generated
code always lexes and parses as far as it goes, with no grammar compiled into the tokenizer:
the pack's own parser is the grammar, the same one the corpus and bench stages use.

Which text is code:
- fence mode (chat): the body of the first ```vox (or bare ```) block; prose around it is free,
  a block tagged with another language is left alone.
- whole mode (completions whose prompt is itself viable code): prompt + completion.
"""

from __future__ import annotations

import re

from mens.errors import MensError
from mens.lang import LanguagePack

_OPEN = re.compile(r"(`{3,})[ \t]*([\w.+#-]*)[^\n]*\n")


class Constraint:
    def __init__(self, pack: LanguagePack):
        self.pack = pack
        self.tags = {t.lower() for t in (*pack.fence_tags, pack.name)}

    @classmethod
    def for_language(cls, name: str) -> "Constraint":
        from mens.lang import get_pack

        try:
            return cls(get_pack(name))
        except ImportError as exc:
            raise MensError(f"the {name} language pack is not available ({exc})", "--grammar",
                            "install or finish that pack, or serve without --grammar") from None

    def whole_mode_prefix(self, prompt: str) -> str | None:
        """For a plain completion: the prompt when it is itself viable code (then prompt +
        completion is constrained), else None (fence mode)."""
        return prompt if prompt.strip() and self.pack.viable_prefix(prompt) else None

    def allows(self, text: str, *, final: bool = False, prefix: str | None = None) -> bool:
        """May the completion read `text` (and, when `final`, end there)?"""
        if prefix is not None:
            return self._code_ok(prefix + text, final)
        return self._fenced_ok(text, final)

    # ------------------------------------------------------------------ the two modes

    def _code_ok(self, code: str, complete: bool) -> bool:
        if complete:
            return self.pack.check(code) is None
        return self.pack.viable_prefix(code)

    def _fenced_ok(self, text: str, final: bool) -> bool:
        start = text.find("```")
        if start < 0:
            return True                          # prose before any code block is free
        m = _OPEN.match(text, start)
        if m is None:
            return True                          # the fence's info line is still being written
        tag = m.group(2).lower()
        if tag and tag not in self.tags:
            return True                          # a block in another language
        body = text[m.end():]
        close = re.search(r"(?m)^" + m.group(1), body)
        if close is not None:                    # a closed block must hold complete code
            return self._code_ok(body[:close.start()], True)
        # A closing fence may be half written ("\n``"): judge the code before it.
        partial = re.search(r"(?:^|\n)`{1,2}$", body)
        if partial is not None:
            return self._code_ok(body[:partial.start() + (1 if body[partial.start()] == "\n" else 0)], True)
        return self._code_ok(body, final)
