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

_WORD_END = re.compile(r"(?<![\w@])[A-Za-z_]\w*\Z")
_OPEN = re.compile(r"(`{3,})[ \t]*([\w.+#-]*)[^\n]*\n")


class Constraint:
    def __init__(self, pack: LanguagePack, keywords: tuple[str, ...] | None = None):
        self.pack = pack
        self.tags = {t.lower() for t in (*pack.fence_tags, pack.name)}
        self.keywords = tuple(keywords if keywords is not None else _pack_keywords(pack))

    @classmethod
    def for_language(cls, name: str) -> "Constraint":
        from mens.lang import get_pack

        try:
            return cls(get_pack(name))
        except ImportError as exc:
            raise MensError(f"the {name} language pack is not available ({exc})", "--grammar",
                            "install or finish that pack, or serve without --grammar") from None
        except MensError as exc:  # the pack registry names --lang; here the flag is --grammar
            raise MensError(exc.what, "--grammar", exc.todo) from None

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
        if self.pack.viable_prefix(code):
            return True
        # Tokens end mid-word: "t" may be on its way to the keyword "to" while the parser sees an
        # identifier where none may stand. Judge the code before a word that is a keyword's start.
        m = _WORD_END.search(code)
        if m and any(k.startswith(m.group()) and k != m.group() for k in self.keywords):
            return self.pack.viable_prefix(code[:m.start()])
        return False

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


def _pack_keywords(pack: LanguagePack) -> tuple[str, ...]:
    """The pack's keywords: its `keywords` attribute, else a KEYWORDS table in its module or the
    module's lexer (where packs keep them). Without them only whole keywords are accepted."""
    import importlib
    import sys

    found = getattr(pack, "keywords", None)
    if found:
        return tuple(found)
    module_name = type(pack).__module__
    for name in (module_name, module_name + ".lexer"):
        try:
            module = sys.modules.get(name) or importlib.import_module(name)
        except ImportError:
            continue
        if isinstance(getattr(module, "KEYWORDS", None), (tuple, list, set, frozenset)):
            return tuple(module.KEYWORDS)
    return ()
