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

    def closing(self, text: str, *, prefix: str | None = None) -> str | None:
        """The shortest text known to end the completion `text` validly from here: the code's
        closing (the pack's `closing_suffix`) and, in fence mode, the closing fence; "" when it may
        end as it is; None when no ending is known (an expression half written)."""
        if prefix is not None:
            return self.pack.closing_suffix(prefix + text)
        if "```" not in text:
            return ""                            # prose: may end anywhere
        block = self._code_block(text)
        if block is None:
            return None                          # an info line half written, or another language's block
        fence, body, close = block
        if close is not None:
            return ""                            # the block is closed (and was complete to close)
        suffix = self.pack.closing_suffix(body)
        if suffix is None:
            return None
        return suffix + ("" if (body + suffix).endswith("\n") else "\n") + fence

    def in_free_text(self, text: str, *, prefix: str | None = None) -> bool:
        """Does the code being written end inside a string literal or a line comment?"""
        if prefix is not None:
            return self.pack.free_text_at_end(prefix + text) is not None
        block = self._code_block(text)
        return block is not None and block[2] is None and self.pack.free_text_at_end(block[1]) is not None

    def _code_block(self, text: str) -> tuple[str, str, re.Match | None] | None:
        """(fence, text after its info line, the closing fence's match in that text or None) of
        the answer's first code block in this language; None when there is none: no fence yet,
        its info line still being written, or a block in another language."""
        start = text.find("```")
        m = _OPEN.match(text, start) if start >= 0 else None
        if m is None or (m.group(2) and m.group(2).lower() not in self.tags):
            return None
        body = text[m.end():]
        # The closing fence is a line of the fence alone (CommonMark; mens.lang.extract_code reads
        # answers so): "```vox" inside the block is not one, and judged as code (_fenced_ok).
        return m.group(1), body, re.search(r"(?m)^" + m.group(1) + r"[ \t]*$", body)

    # ------------------------------------------------------------------ the two modes

    def _code_ok(self, code: str, complete: bool) -> bool:
        if complete:
            return self.pack.check(code) is None
        if "\n" in (self.pack.free_text_at_end(code) or ""):
            return False      # strings the model writes stay on one line (a stray quote would swallow the rest)
        if self.pack.viable_prefix(code):
            return True
        # Tokens end mid-word: "t" may be on its way to the keyword "to" while the parser sees an
        # identifier where none may stand. Allow it when some keyword it starts would be viable
        # there (not merely the code before it: "@table deriv" must not pass as "derived" could
        # never stand after "@table").
        m = _WORD_END.search(code)
        if m:
            head, word = code[:m.start()], m.group()
            return any(self.pack.viable_prefix(head + k) for k in self.keywords if k.startswith(word) and k != word)
        return False

    def _fenced_ok(self, text: str, final: bool) -> bool:
        block = self._code_block(text)
        if block is None:
            return True                          # prose, an info line being written, another language
        _, body, close = block
        if close is not None:                    # a closed block must hold complete code, and some
            code = body[:close.start()]
            return bool(code.strip()) and self._code_ok(code, True)
        # A closing fence may be half written ("\n``", or "\n```" before its newline): judge the
        # code before it.
        partial = re.search(r"(?:^|\n)`{1,2}$", body)
        if partial is not None:
            code = body[:partial.start() + (1 if body[partial.start()] == "\n" else 0)]
            return bool(code.strip()) and self._code_ok(code, True)
        # A line opening with a fence that is not the closing one ("```vox" again) reads as a
        # fence to every reader of the answer; the Vox lexer drops backticks, so only this rule
        # keeps such a line out of the code.
        if re.search(r"(?m)^`{3}", body):
            return False
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


class TokenChooser:
    """The engine's side of grammar mode, for one constrained row per call: the sampled token if
    the text it makes is allowed; else a *bridge* (a likely token after which the sampled one
    would fit); else the most probable allowed token that writes code (`_no_progress`) — the top
    candidates first, then wider slices of the vocabulary (an end token is always tried too, so
    complete code can stop). In the last `finish_reserve` tokens of the budget the code is
    steered to a close (`_finishing`). Why each rule: docs/serving.md, grammar mode. Counts the
    replacements (`rejections`), the steps where nothing fitted and the unconstrained token was
    kept (`fallbacks`) and the closing tokens written (`finishes`)."""

    def __init__(self, constraint: Constraint, tokenizer, eos_ids: list[int], *, top_candidates: int = 32,
                 max_candidates: int = 1024, finish_reserve: int = 32):
        self.constraint, self.tokenizer, self.eos_ids = constraint, tokenizer, eos_ids
        self.top_candidates, self.max_candidates = top_candidates, max_candidates
        self.finish_reserve = finish_reserve
        self.pieces = token_pieces(tokenizer)   # each token's text, built once
        # Tokens never taken as a replacement: a stray byte of a multi-byte character or a
        # control character writes nothing a parser reads (Vox's lexer drops them), so they
        # "fit" anywhere and a lost model would fill its answer with them.
        self.junk = {i for i, p in enumerate(self.pieces)
                     if any(ch == "\ufffd" or (ch < " " and ch not in "\n\t\r") or ch == "\x7f" for ch in p)}
        self.rejections = self.fallbacks = self.finishes = 0
        self._closing_plan: dict[str, str] = {}      # text so far → the rest of the closing begun
        self._free_text_key: tuple | None = None      # _opens_free_text's one-step memo
        self._text_in_free_text = False

    def choose(self, text: str, generated: list[int], token: int, prefix: str | None, probs,
               remaining: int | None = None) -> int:
        """`text`/`generated`: the completion so far; `token`: the sampled one; `probs`: the
        row's distribution (a torch tensor over the vocabulary); `remaining`: the tokens the
        completion may still take, this one included (None: no limit). In the last
        `finish_reserve` of them the code is steered to an end it can reach in time."""
        if remaining is not None and remaining <= self.finish_reserve:
            chosen = self._finishing(text, generated, token, prefix, probs, remaining)
            if chosen is not None:
                return chosen
        tried: set[int] = set()
        limit = self.top_candidates
        batch = [token]
        while True:
            for cand in batch:
                if cand in tried:
                    continue
                tried.add(cand)
                is_eos = cand in self.eos_ids
                if not is_eos and self._writes_nothing(cand):
                    continue
                candidate = text if is_eos else self._candidate_text(text, generated, cand)
                if cand != token and not is_eos and self._no_progress(text, candidate, cand, prefix):
                    continue
                if self.constraint.allows(candidate, final=is_eos, prefix=prefix):
                    self.rejections += len(tried) - 1
                    return cand
                if cand == token and not is_eos:
                    bridge = self._bridge(text, generated, token, prefix, probs)
                    if bridge is not None:
                        self.rejections += 1
                        return bridge
            if len(tried) >= min(probs.numel(), self.max_candidates):
                break
            limit = min(limit * 4 if len(tried) > self.top_candidates else limit, self.max_candidates,
                        probs.numel())
            batch = probs.topk(limit).indices.tolist() + self.eos_ids  # topk: no full sort of the vocabulary
            if all(c in tried for c in batch):
                break
        self.fallbacks += 1
        return token

    def _finishing(self, text: str, generated: list[int], token: int, prefix: str | None, probs,
                   remaining: int) -> int | None:
        """Near the budget's end: the most probable allowed token after which the code can still
        be closed in the tokens left (the chosen token first), else the first token of closing it
        now; None when neither is known (the ordinary choice then stands). Without this a
        completion that runs out of tokens mid-block never parses, however good it was."""
        top = probs.topk(min(self.top_candidates, probs.numel())).indices.tolist()
        for cand in [token, *top, *self.eos_ids]:
            if cand in self.eos_ids:
                if self.constraint.allows(text, final=True, prefix=prefix):
                    return cand
                continue
            if self._writes_nothing(cand):
                continue
            candidate = self._candidate_text(text, generated, cand)
            if not self.constraint.allows(candidate, prefix=prefix):
                continue
            closing = self.constraint.closing(candidate, prefix=prefix)
            if closing is not None and self._n_tokens(closing) <= remaining - 1:
                return cand
        return self._closing_token(text, generated, prefix)

    def _closing_token(self, text: str, generated: list[int], prefix: str | None) -> int | None:
        """The first token of the text that ends the code from here, if one is known. A closing
        begun on an earlier step is followed to its end: asked afresh after its first token, the
        pack may open its closing with the same separator again (`" =>  0"` after a space, a
        newline after a newline) and the answer would fill with blanks."""
        closing = self._closing_plan.pop(text, None) or self.constraint.closing(text, prefix=prefix)
        if closing:
            first = self.tokenizer(closing, add_special_tokens=False).input_ids[:1]
            candidate = self._candidate_text(text, generated, first[0]) if first else ""
            if first and self.constraint.allows(candidate, prefix=prefix):
                self.finishes += 1
                written = candidate[len(text):]
                if candidate.startswith(text) and closing.startswith(written) and closing != written:
                    if len(self._closing_plan) > 1024:   # rows that stopped leave their plans behind
                        self._closing_plan.clear()
                    self._closing_plan[candidate] = closing[len(written):]
                return first[0]
        return None

    def _bridge(self, text: str, generated: list[int], token: int, prefix: str | None, probs) -> int | None:
        """Where the model's own token does not fit: the most probable of its top tokens after
        which that token would fit (`)` before the newline it wanted after `f("a"`), so the
        model's intent survives one token later; None when no such token is among them."""
        wanted = self.pieces[token] if token < len(self.pieces) else ""
        if not wanted or "\ufffd" in wanted:
            return None
        for cand in probs.topk(min(4 * self.top_candidates, probs.numel())).indices.tolist():
            if cand == token or cand in self.eos_ids or self._writes_nothing(cand):
                continue
            candidate = self._candidate_text(text, generated, cand)
            if self._no_progress(text, candidate, cand, prefix):
                continue
            if self.constraint.allows(candidate + wanted, prefix=prefix) and self.constraint.allows(candidate, prefix=prefix):
                return cand
        return None

    def _no_progress(self, text: str, candidate: str, cand: int, prefix: str | None) -> bool:
        """Is `cand` a replacement (taken because the model's own token did not fit) that writes
        no code: junk, more blank after blank, or the way into a string or comment?"""
        return cand in self.junk or (not self.pieces[cand].strip() and text[-1:].isspace()) or \
            self._opens_free_text(text, candidate, prefix)

    def _opens_free_text(self, text: str, candidate: str, prefix: str | None) -> bool:
        """Would this replacement token open a string literal or a comment? Either takes any
        text, so a quote or `//` picked because the model's own token did not fit hands the rest
        of the answer to a model that meant something else (`"desc"` + `",` → `"desc"", grade…`)."""
        if (text, prefix) != self._free_text_key:   # the same text for every candidate of a step
            self._free_text_key = (text, prefix)
            self._text_in_free_text = self.constraint.in_free_text(text, prefix=prefix)
        return not self._text_in_free_text and self.constraint.in_free_text(candidate, prefix=prefix)

    def _writes_nothing(self, cand: int) -> bool:
        """A special token other than an end ([UNK], [PAD]) adds no text: always "allowed", it
        would be chosen at every step where nothing else fits and the answer would never move."""
        return cand < len(self.pieces) and self.pieces[cand] == ""

    def _n_tokens(self, text: str) -> int:
        return len(self.tokenizer(text, add_special_tokens=False).input_ids) if text else 0

    def _candidate_text(self, text: str, generated: list[int], cand: int) -> str:
        """The completion's text with `cand` appended: the known text plus the token's piece, or a
        full decode where a multi-byte character spans tokens."""
        piece = self.pieces[cand] if cand < len(self.pieces) else "\ufffd"
        if "\ufffd" in piece or text.endswith("\ufffd"):
            return self.tokenizer.decode(generated + [cand], skip_special_tokens=True)
        return text + piece


def token_pieces(tokenizer) -> list[str]:
    """Each token's text as it reads after other text. Decoding a token alone can drop a leading
    space (SentencePiece), so each is decoded after an anchor token and the anchor's text cut off."""
    anchor = tokenizer("a", add_special_tokens=False).input_ids[-1:]
    lead = tokenizer.decode(anchor)
    ids = [anchor + [i] for i in range(len(tokenizer))]
    backend = getattr(tokenizer, "backend_tokenizer", None)   # fast tokenizers decode the batch in Rust
    texts = backend.decode_batch(ids, skip_special_tokens=True) if backend is not None \
        else tokenizer.batch_decode(ids, skip_special_tokens=True)
    return [t[len(lead):] if t.startswith(lead) else "\ufffd" for t in texts]
