"""Grammar-constrained decoding: generated code stays a viable prefix of the pack's grammar."""

import hashlib
import re
import time

import pytest

from mens.lang import get_pack
from mens.lang.base import Analysis, Diagnostic, LanguagePack
from mens.grammar import Constraint


class SexpPack(LanguagePack):
    """A real (small) language: s-expressions of lowercase/digit atoms. Its parser reports an
    unclosed list as "unexpected end of input", as every pack does for input that ends early."""

    name, fence_tags, extensions = "sexp", ("sexp",), (".sx",)

    def analyze(self, text, *, script=False):
        depth = 0
        for i, ch in enumerate(text):
            if ch == "(":
                depth += 1
            elif ch == ")":
                depth -= 1
                if depth < 0:
                    return Analysis(False, Diagnostic(1, i + 1, "unexpected ')'"))
            elif not (ch.isspace() or (ch.isascii() and (ch.islower() or ch.isdigit()))):
                return Analysis(False, Diagnostic(1, i + 1, f"unexpected character {ch!r}"))
        if depth:
            return Analysis(False, Diagnostic(1, len(text) + 1, "unexpected end of input: unclosed '('"))
        return Analysis(True)

    def structural_hash(self, text):
        return hashlib.sha256("".join(text.split()).encode()).hexdigest()


def test_fence_and_whole_modes():
    c = Constraint(SexpPack())
    assert c.allows("Here is the code:")                      # prose before a block is free
    assert c.allows("Here:\n```sex")                          # the info line is still open
    assert c.allows("```sexp\n(add 1 (mul 2")                 # viable: unclosed lists
    assert not c.allows("```sexp\n(add 1 ]")                  # a lexer error
    assert not c.allows("```sexp\n(add 1", final=True)        # cannot end inside an open list
    assert not c.allows("```sexp\n(add 1\n```")               # cannot close the fence on it either
    assert not c.allows("```sexp\n(add 1\n`")                 # … nor start closing it
    assert c.allows("```sexp\n(add 1 2)\n```\nDone!")         # complete code, then free prose
    assert c.allows("```python\nprint('x')\n```")             # another language is left alone
    assert not c.allows("```sexp\n```") and not c.allows("```sexp\n`")   # an empty block may not close
    # A closing fence is a line of backticks alone (as extract_code reads answers): "```sexp" in
    # the block is no closing fence, and no code either — a reader would take it for a fence.
    assert not c.allows("```sexp\n```sexp") and not c.allows("```sexp\n(add 1 2)\n```sexp\n(x")
    assert c.allows("```sexp\n(add 1 2)\n```  \nDone")
    assert c.whole_mode_prefix("(add 1") == "(add 1" and c.whole_mode_prefix("Write code") is None
    assert c.allows(" 2 (x", prefix="(add 1") and not c.allows(" 2))", prefix="(add 1")
    assert c.allows(" 2)", prefix="(add 1", final=True) and not c.allows(" 2", prefix="(add 1", final=True)


class WordsPack(SexpPack):
    """Sexp whose only words are the keywords `add` and `mul` (and numbers)."""

    def analyze(self, text, *, script=False):
        for m in re.finditer(r"[a-z]\w*", text):
            if m.group() not in ("add", "mul"):
                return Analysis(False, Diagnostic(1, m.start() + 1, f"unknown word {m.group()!r}"))
        return super().analyze(text)


def test_a_keyword_being_written_is_judged_by_the_code_before_it():
    pack = WordsPack()
    c = Constraint(pack, keywords=("add", "mul"))
    assert not pack.viable_prefix("(ad") and c.allows("(ad", prefix="")    # "ad" is on its way to "add"
    assert c.allows("(add 1 (m", prefix="") and not c.allows("(add 1 (x", prefix="")  # no keyword starts "x"
    assert not c.allows("(ad\n", prefix="") and not c.allows("(ad)", prefix="", final=True)  # words end whole


def _run(engine, prompt, **sampling):
    from mens.serve.requests import Request, Sampling

    out = {"text": "", "done": None}

    def sink(ev):
        if ev[0] == "delta":
            out["text"] += ev[2]
        else:
            out["done"] = ev

    req = Request(engine.tokenizer(prompt).input_ids, Sampling(**sampling), sink, grammar=engine.grammar is not None,
                  grammar_prefix=engine.grammar.whole_mode_prefix(prompt) if engine.grammar else None)
    engine.submit(req)
    deadline = time.time() + 60
    while out["done"] is None:
        assert time.time() < deadline
        time.sleep(0.01)
    return out["text"]


def test_constrained_generation_stays_viable(tiny_model_dir):
    from mens.inference import load_model
    from mens.serve.engine import Engine

    model, tok, info = load_model(tiny_model_dir, device="cpu")
    pack = SexpPack()
    free = Engine(model, tok, context_window=512)
    constrained = Engine(model, tok, context_window=512, grammar=Constraint(pack))
    try:
        prompt = "(add 1 (mul 2 "
        runs = [dict(max_tokens=24, temperature=0)] + [dict(max_tokens=24, temperature=1.0, seed=s) for s in range(4)]
        free_out = [_run(free, prompt, **kw) for kw in runs]
        kept = [_run(constrained, prompt, **kw) for kw in runs]
        assert all(pack.viable_prefix(prompt + t) for t in kept), kept
        assert not all(pack.viable_prefix(prompt + t) for t in free_out)    # the random model alone fails
        stats = constrained.snapshot()
        assert stats["grammar_rejections"] > 0 and stats["grammar_fallbacks"] == 0
    finally:
        free.stop()
        constrained.stop()


def test_vox_pack_constraint_accepts_every_prefix_of_valid_code_and_refuses_a_wrong_turn():
    c = Constraint.for_language("vox")
    source = "fn add(a: int, b: int) to int {\n    return a + b\n}\n"
    assert get_pack("vox").check(source) is None
    for cut in range(len(source)):
        assert c.allows(source[:cut], prefix=""), repr(source[:cut])
    assert c.allows(source, prefix="", final=True)
    assert not c.allows(source[:20] + ")}", prefix="")
    assert not c.allows(source[:-2], prefix="", final=True)  # an unclosed body cannot end the answer
    fenced = "Here it is:\n```vox\n" + source + "```\n"
    assert c.allows(fenced) and not c.allows("```vox\nfn add(a: int\n```")
    # A half-written keyword passes only where that keyword may stand: "deriv" could become
    # "derived" inside a component, never right after "@table" (the quickstart model's grammar
    # bench once ended answers there).
    component = "component Thermo() {\n    state t: int = 0\n    deriv"
    assert c.allows(component + "ed", prefix="") and c.allows(component, prefix="")
    assert not c.allows("@table deriv", prefix="") and c.allows("@table ty", prefix="")


@pytest.mark.slow  # a live server
def test_grammar_modes_through_the_api(tiny_model_dir):
    from live_server import LiveServer
    from mens.inference import load_model
    from mens.serve.app import build_app
    from mens.serve.engine import Engine

    model, tok, _ = load_model(tiny_model_dir, device="cpu")
    pack = SexpPack()
    engine = Engine(model, tok, context_window=512, grammar=Constraint(pack))
    server = LiveServer(build_app(engine, {"m": None}), engine)
    try:
        client = server.client()
        msgs = [{"role": "user", "content": "an s-expression please"}]
        kw = dict(model="m", messages=msgs, max_tokens=20, temperature=0)
        whole = client.chat.completions.create(**kw, extra_body={"grammar": "whole"}).choices[0].message.content
        off = client.chat.completions.create(**kw, extra_body={"grammar": "off"}).choices[0].message.content
        fence = client.chat.completions.create(**kw).choices[0].message.content   # auto: no fence → free
        assert pack.viable_prefix(whole) and whole != off and fence == off
        prompt = "(add 1 "
        done = client.completions.create(model="m", prompt=prompt, max_tokens=20, temperature=0).choices[0].text
        assert pack.viable_prefix(prompt + done)                                   # auto: prompt is code
        with pytest.raises(Exception) as exc:
            client.chat.completions.create(**kw, extra_body={"grammar": "sometimes"})
        assert exc.value.status_code == 400
    finally:
        server.close()


def test_python_pack_constraint_on_prefixes():
    """The Python pack now answers for unfinished code, so grammar mode has something to keep."""
    c = Constraint.for_language("python")
    source = "def add(a, b):\n    return a + b\n\n\nclass A:\n    x = [1, 2]\n"
    for cut in range(len(source)):
        assert c.allows(source[:cut], prefix=""), repr(source[:cut])
    assert c.allows(source, prefix="", final=True) and not c.allows(source[:10], prefix="", final=True)
    assert c.whole_mode_prefix("def f(") == "def f(" and c.whole_mode_prefix("Write a function") is None
    assert not c.allows("x = )", prefix="") and not c.allows(" :", prefix="def f(")
    assert c.allows("Sure:\n```python\ndef f(x):\n    return x\n```\n") and not c.allows("```py\ndef f(:")


@pytest.mark.slow  # a live server
def test_python_grammar_through_the_server(tiny_model_dir):
    """`mens serve --grammar python` (build_server as the CLI calls it) over a tiny random model: left
    alone, its completion of a Python prompt soon stops being Python; constrained, prompt plus
    completion stays a viable prefix, and the engine turned tokens away to keep it so."""
    from live_server import LiveServer
    from mens.lang import get_pack
    from mens.serve.app import build_server

    pack = get_pack("python")
    app, engine = build_server(str(tiny_model_dir), name="py", grammar="python", device="cpu")
    server = LiveServer(app, engine)
    try:
        client = server.client()
        prompt = "def add(a, b):\n    return a +"
        runs = [dict(temperature=0)] + [dict(temperature=1.0, seed=s) for s in range(3)]

        def complete(grammar, **sampling):
            return client.completions.create(model="py", prompt=prompt, max_tokens=24, **sampling,
                                             extra_body={"grammar": grammar}).choices[0].text

        kept = [complete("auto", **r) for r in runs]       # auto: the prompt is code → whole mode
        free = [complete("off", **r) for r in runs]
        assert all(pack.viable_prefix(prompt + t) for t in kept), kept
        assert not all(pack.viable_prefix(prompt + t) for t in free), free
        assert kept[0] != free[0]
        stats = engine.snapshot()
        assert stats["grammar_rejections"] > 0 and stats["grammar_fallbacks"] == 0
        chat = client.chat.completions.create(model="py", messages=[{"role": "user", "content": "code"}],
                                              max_tokens=16, temperature=0, extra_body={"grammar": "whole"})
        assert pack.viable_prefix(chat.choices[0].message.content)
    finally:
        server.close()


@pytest.mark.parametrize("reserve", [0, 16])
def test_grammar_mode_closes_the_code_before_the_token_budget_runs_out(tiny_model_dir, reserve):
    """A random model never ends code by itself: with no reserve the completion of a half-written
    function stops at max_tokens still open; with a reserve of 16 (the default is 32) its last tokens
    close it (a brace on its own line), so the whole program parses."""
    from mens.inference import load_model
    from mens.serve.engine import Engine

    model, tok, _ = load_model(tiny_model_dir, device="cpu")
    pack = get_pack("vox")
    engine = Engine(model, tok, context_window=512, grammar=Constraint(pack))
    assert engine._chooser.finish_reserve == 32        # the default
    engine._chooser.finish_reserve = reserve
    try:
        prompt = "fn add(a: int, b: int) to int {\n    return a"
        outs = [_run(engine, prompt, max_tokens=12, temperature=t, seed=s) for t, s in [(0, 0), (1.0, 1), (1.0, 2)]]
        complete = [pack.check(prompt + out) is None for out in outs]
        assert all(pack.viable_prefix(prompt + out) for out in outs)
        assert all(complete) if reserve else not any(complete), (outs, complete)
        if reserve:
            assert engine.snapshot()["grammar_finishes"] > 0
    finally:
        engine.stop()


def test_vox_closing_suffix_and_open_strings():
    """What grammar mode appends to finish Vox code, checked by the pack (and the reference
    parser: each closed text below is accepted by vox-ref-oracle)."""
    pack = get_pack("vox")
    cases = {
        "fn f(x: int) to int {\n    return g(x, [1, 2": "])\n}",
        'fn f() to str {\n    return "ab': '"\n}',
        "type A {\n    a: int\n": "}",
        'fn f() to str {\n    return "a\\': '\\"\n}',
        "": "",
        # Closing brackets is not enough: what the parser expects at the end, step by step.
        "fn f() {\n    let x = ": " 0\n}",
        "fn f() {\n    if c": " { \n}\n}",
        "fn s": "( x) { \n}",
        "@endpoint(kind:": " query) fn  x( x) { \n}",
        "fn f(x: int) t": "o int { \n}",          # a word being typed: finished first (`to`)
        "component A(x: int) {\n    state n": " =  0\n}",
        "fn f() to int {\n    match x {\n        1": " =>  0\n}\n}",
        "import notes.queries as { l": " }",     # a brace on a line of its own does not end an import list
        "fn f() {\n    let v = workflow.version(": None,   # its arguments must be literals: no filler fits
        'routes {\n    "/" to Home\n    "/notes" to Notes with': " loader:  x",   # a described expectation
        "fn f() {\n    let x = 1 // one": "\n\n}",  # a comment at the end is ended first
    }
    for text, suffix in cases.items():
        assert pack.closing_suffix(text) == suffix, text
        if suffix is not None:
            assert pack.check(text + suffix) is None
    assert pack.free_text_at_end('fn f() to str {\n    return "ab') == '"ab'
    assert pack.free_text_at_end('fn f() to str {\n    return "ab"') is None
    assert pack.free_text_at_end("fn f() {\n    let x = 1 // one") == "// one"
    assert pack.free_text_at_end('fn f() {\n    let x = "a//b"') is None          # `//` inside a string
    assert pack.free_text_at_end("fn f() {\n    let x = 1 // one\n") is None       # the comment ended
    c = Constraint(pack)
    assert c.allows('fn f() to str {\n    return "ab', prefix="")
    assert not c.allows('fn f() to str {\n    return "ab\n', prefix="")   # generated strings stay on one line
    assert c.closing("```vox\nfn f() {\n    let x = 1", prefix=None) == "\n}\n```"
    assert c.closing("Sure.", prefix=None) == "" and c.closing("```vox\nfn f() {\n    let v = workflow.version(") is None


def test_special_tokens_that_write_nothing_are_never_chosen(tiny_model_dir):
    """[PAD]/[UNK] decode to nothing, so the text after them is always "allowed"; choosing one
    where nothing else fits would repeat forever (the quickstart model's grammar bench did)."""
    import torch

    from mens.inference import load_model
    from mens.grammar import TokenChooser

    _, tok, _ = load_model(tiny_model_dir, device="cpu")
    chooser = TokenChooser(Constraint(get_pack("vox")), tok, [tok.eos_token_id])
    silent = [i for i, piece in enumerate(chooser.pieces) if piece == "" and i != tok.eos_token_id]
    assert silent
    probs = torch.full((len(tok),), 1e-6)
    probs[silent[0]] = 1.0
    chosen = chooser.choose("```vox\nfn f(", [], silent[0], None, probs)
    assert chosen not in silent and chooser.constraint.allows("```vox\nfn f(" + chooser.pieces[chosen])


def test_a_replacement_token_never_opens_a_string_or_comment(tiny_model_dir):
    """Where the model's own token does not fit, the replacement is the most probable token that
    does — but not a quote or `//`: inside a string or comment anything fits, so the rest of the
    answer would drift there (the quickstart model's `"desc"", gradegradegrade…`). The model's
    own token may open one."""
    import torch

    from mens.inference import load_model
    from mens.grammar import TokenChooser

    _, tok, _ = load_model(tiny_model_dir, device="cpu")
    chooser = TokenChooser(Constraint(get_pack("vox")), tok, [tok.eos_token_id])
    ids = {piece: i for i, piece in enumerate(chooser.pieces)}
    text = '```vox\n@mcp.resource("a://b", "All rows"'
    newline, quote, comment, close = ids["\n"], ids['"'], ids["//"] if "//" in ids else ids["/"], ids[")"]
    # No second string may follow the description; after the comma a string may stand.
    at_arg = '```vox\n@mcp.resource("a://b", '
    assert not chooser.constraint.allows(text + "\n") and not chooser.constraint.allows(text + '"')
    assert chooser.constraint.allows(at_arg + '"') and not chooser.constraint.allows(at_arg + "\n")
    probs = torch.full((len(tok),), 1e-6)
    probs[newline], probs[quote], probs[comment], probs[close] = 0.5, 0.3, 0.15, 0.05
    assert chooser.choose(text, [], newline, None, probs) == close    # the bridge: `)` lets "\n" follow
    assert chooser.choose(at_arg, [], quote, None, probs) == quote    # the model's own choice stands
    assert chooser.choose(at_arg, [], newline, None, probs) not in (quote, comment)  # a replacement never opens one
    probs[close] = 1e-6                                               # no bridge among the top tokens:
    space = ids[" "]
    probs[space] = 0.2
    assert chooser.choose(text, [], newline, None, probs) == space     # the likeliest that writes code …
    chosen = chooser.choose(text + " ", [], newline, None, probs)     # … but not blank after blank
    assert chosen not in (quote, comment, space), chooser.pieces[chosen]
    probs[space] = 1e-6
    junk = sorted(chooser.junk)[:3]
    probs[junk] = 0.4                                                 # stray bytes, control characters
    assert chooser.choose(text, [], newline, None, probs) not in junk


def test_bench_grammar_mode_ranks_replacements_by_the_models_distribution(tiny_model_dir):
    """Greedy grammar mode once divided the logits by a temperature of 1e-6: every token but the
    top one had probability exactly 0, so replacements came in arbitrary (id) order."""
    import torch

    from mens.evaluate.bench import GrammarProcessor
    from mens.inference import load_model

    _, tok, _ = load_model(tiny_model_dir, device="cpu")
    proc = GrammarProcessor("vox", tok, [tok.eos_token_id], prompt_len=0)
    seen = {}
    proc.chooser.choose = lambda text, generated, token, prefix, probs, remaining=None: \
        seen.setdefault("probs", probs) is not None and token
    scores = torch.randn(1, len(tok))
    proc(torch.zeros(1, 0, dtype=torch.long), scores.clone())
    assert torch.allclose(seen["probs"], torch.softmax(scores[0], -1))


def test_a_closing_begun_at_the_budgets_end_is_followed_through(tiny_model_dir):
    """In the last tokens of the budget the chooser writes the closing the pack knows, a token a
    step. Asked afresh after the closing's first token (a space), the pack opens its closing with
    a space again: the quickstart model's grammar answers ended in a run of blanks and did not
    parse (`… shsh          `, `}\n\n\n\n…`). The closing begun is followed to its end."""
    from mens.inference import load_model
    from mens.grammar import TokenChooser

    _, tok, _ = load_model(tiny_model_dir, device="cpu")
    pack = get_pack("vox")
    chooser = TokenChooser(Constraint(pack), tok, [tok.eos_token_id])
    text = "```vox\nfn f() {\n    let a ="
    closing = chooser.constraint.closing(text)
    assert closing == " 0\n}\n```" and pack.closing_suffix("fn f() {\n    let a = ") == " 0\n}"  # the space again
    generated = tok(text, add_special_tokens=False).input_ids
    for _ in range(chooser._n_tokens(closing)):
        token = chooser._closing_token(text, generated, None)
        text, generated = text + chooser.pieces[token], generated + [token]
    assert text == "```vox\nfn f() {\n    let a = 0\n}\n```" and chooser.constraint.allows(text, final=True)
