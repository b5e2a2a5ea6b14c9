"""The held-out bench: generate k samples per task, score whether the code parses, is not a stub
and contains what the task asks for, and report pass@1 / pass@k.

A task is one JSONL object `{id, category, prompt, expect_contains[], context_files[], lang?}`.
A sample passes when all three checks do:

- parses:   the code (first fenced block of the response, else the whole response) is accepted
            by the task's language pack (`lang`, default vox);
- not stub: no placeholder markers (TODO, `...`, `unimplemented`, `pass`-only bodies, `@hole`)
            and more than one meaningful non-comment line;
- semantic: every string in `expect_contains` occurs in the code.

pass@k uses the unbiased estimator of Chen et al. (2021), 1 - C(n-c, k) / C(n, k), averaged
over tasks, where n samples were drawn and c passed.
"""

from __future__ import annotations

import math
import re
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from mens.errors import MensError
from mens.chat_template import chat_prompt, stop_token_ids
from mens.lang.base import extract_code, has_fence
from mens.files import write_json_atomic
from mens.evaluate.tasks import BenchTask, load_tasks

# Placeholder markers a model writes instead of code. `...` is not Vox syntax (ranges are `..`),
# and in Python it is the conventional "fill this in" body.
_STUB_MARKERS = re.compile(r"\b(TODO|FIXME|XXX|unimplemented|NotImplementedError)\b|\btodo!|\.\.\.|…"
                           r"|@hole\b|(?i:your code here)|<placeholder>")
# Lines that carry no logic of their own: a bare `pass`, an ellipsis, lone braces.
_FILLER_LINES = {"pass", "...", "{", "}", "{}", "(", ")", "[", "]"}


# ---------------------------------------------------------------- scoring

@dataclass
class SampleScore:
    code: str
    parses: bool
    parse_message: str | None
    stub_reason: str | None
    missing: list[str]
    passed: bool


def meaningful_lines(code: str, comment_prefixes: tuple[str, ...] = ("//", "#")) -> list[str]:
    """Lines that carry code: not blank, not comments, not a bare `pass`/`...`/brace/fence."""
    out = []
    for line in code.splitlines():
        s = line.strip()
        if not s or (comment_prefixes and s.startswith(comment_prefixes)) or s in _FILLER_LINES \
                or s.startswith(("```", "~~~")):
            continue
        out.append(s)
    return out


def stub_reason(code: str, comment_prefixes: tuple[str, ...] = ("//", "#")) -> str | None:
    """Why `code` is a placeholder rather than an answer, or None when it is real code."""
    marker = _STUB_MARKERS.search(code)
    if marker:
        return f"placeholder marker {marker.group(0)!r}"
    n = len(meaningful_lines(code, comment_prefixes))
    if n <= 1:
        return f"only {n} meaningful non-comment line(s)"
    return None


def code_of(response: str) -> str:
    """The code of a response: its first fenced block; else, when generation stopped inside a
    fence it opened (max_new_tokens), what follows the opening line; else the whole response."""
    if has_fence(response):
        return extract_code(response)[0].strip("\n")
    m = re.search(r"^(`{3,}|~{3,})[^\n]*\n", response, re.M)
    return (response[m.end():] if m else response).strip("\n")


def score_sample(response: str, task: BenchTask, pack=None) -> SampleScore:
    """Score one generated response against its task (the pack defaults to the task's `lang`)."""
    if pack is None:
        from mens.lang import get_pack

        pack = get_pack(task.lang)
    code = code_of(response)
    prefixes = tuple(pack.comment_prefixes) or ("//", "#")
    if meaningful_lines(code, prefixes):
        err = pack.check(code)
        parses, message = err is None, (str(err) if err else None)
    else:  # an empty file parses, but a response without code has not written any
        parses, message = False, "no code in the response"
    stub = stub_reason(code, prefixes)
    missing = [n for n in task.expect_contains if n not in code]
    return SampleScore(code=code, parses=parses, parse_message=message, stub_reason=stub, missing=missing,
                       passed=parses and stub is None and not missing)


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k for one task: n samples, c correct (Chen et al. 2021, numerically stable)."""
    if k > n:
        raise ValueError(f"k={k} > n={n}")
    if n - c < k:
        return 1.0
    return 1.0 - math.prod(1.0 - k / i for i in range(n - c + 1, n + 1))


def _rates(items: list[dict]) -> dict[str, float]:
    samples = [s for it in items for s in it["samples"]]
    ns = max(1, len(samples))
    return {
        "n_tasks": len(items),
        "pass_at_1": sum(it["pass_at_1"] for it in items) / max(1, len(items)),
        "pass_at_k": sum(it["pass_at_k"] for it in items) / max(1, len(items)),
        "parse_rate": sum(s["parses"] for s in samples) / ns,
        "semantic_pass_rate": sum(not s["missing"] for s in samples) / ns,
        "anti_stub_rate": sum(s["stub_reason"] is None for s in samples) / ns,
    }


def score_bench(tasks: list[BenchTask], responses: list[list[str]], k: int) -> dict[str, Any]:
    """Scores and summary for `responses[i]` (n samples) of `tasks[i]` — the results document
    minus run details. Pure: the tests call it on hand-written responses."""
    from mens.lang import get_pack

    items = []
    for task, outs in zip(tasks, responses, strict=True):
        pack = get_pack(task.lang)
        scores = [score_sample(r, task, pack) for r in outs]
        n, c = len(scores), sum(s.passed for s in scores)
        items.append({"id": task.id, "category": task.category, "lang": task.lang, "prompt": task.prompt,
                      "n": n, "correct": c, "pass_at_1": c / n if n else 0.0,
                      "pass_at_k": pass_at_k(n, c, min(k, n)) if n else 0.0,
                      "samples": [dict(asdict(s), response=r) for s, r in zip(scores, outs)]})
    by_cat: dict[str, list[dict]] = {}
    for it in items:
        by_cat.setdefault(it["category"], []).append(it)
    return {**_rates(items), "by_category": {c: _rates(v) for c, v in sorted(by_cat.items())},
            "items": items}


# ---------------------------------------------------------------- generation

class _AnswerIsCode:
    """The bench's view of a response: code in a fence (`mens serve --grammar`'s fence mode) when
    it opens with one, else code from its first character (whole mode) — so an answer can never
    escape the grammar by not opening a fence. An empty answer may not end."""

    def __init__(self, constraint):
        self.constraint = constraint

    def allows(self, text: str, *, final: bool = False, prefix: str | None = None) -> bool:
        if not text.strip():
            return not final
        return self.constraint.allows(text, final=final, prefix=_code_prefix(text))

    def closing(self, text: str, *, prefix: str | None = None) -> str | None:
        return self.constraint.closing(text, prefix=_code_prefix(text)) if text.strip() else None

    def in_free_text(self, text: str, *, prefix: str | None = None) -> bool:
        return self.constraint.in_free_text(text, prefix=_code_prefix(text))


def _code_prefix(text: str) -> str | None:
    """The constraint's `prefix` for an answer: None (fence mode) when it opens with a fence, else
    "" (the whole answer is code)."""
    return None if text.lstrip().startswith("`") else ""


class GrammarProcessor:
    """A `transformers` logits processor for grammar mode (`--grammar vox`): in each row it keeps
    only the token `mens.grammar.TokenChooser` picks — the model's own choice (greedy, or
    sampled at `temperature`) when the code stays a viable prefix, else the most probable token
    that keeps it one; an end token only where the code is complete. The check is the one `mens
    serve --grammar` runs, with the whole answer held to be code when it opens no fence."""

    def __init__(self, lang: str, tokenizer, stop: list[int], prompt_len: int, temperature: float = 0.0,
                 max_new_tokens: int | None = None):
        from mens.grammar import Constraint, TokenChooser

        self.tokenizer, self.stop, self.prompt_len, self.temperature = tokenizer, set(stop), prompt_len, temperature
        self.max_new_tokens = max_new_tokens
        self.chooser = TokenChooser(_AnswerIsCode(Constraint.for_language(lang)), tokenizer, list(stop))

    def __call__(self, input_ids, scores):
        import torch

        # Greedy ranks replacements by the model's own distribution: dividing by a tiny
        # temperature would make every token but the top one exactly 0, and their order arbitrary.
        # The chooser works on the host: one copy of the step's tensors there (on a GPU, each
        # .tolist() / int() per row would be a sync of its own).
        probs = torch.softmax(scores.float() / (self.temperature if self.temperature > 0 else 1.0), dim=-1).cpu()
        greedy = scores.argmax(-1).tolist()
        answers = input_ids[:, self.prompt_len:].tolist()
        for row, generated in enumerate(answers):
            if self.stop.intersection(generated):
                continue  # this row has ended; generate() pads it
            token = int(torch.multinomial(probs[row], 1)) if self.temperature > 0 else greedy[row]
            text = self.tokenizer.decode(generated, skip_special_tokens=True)
            remaining = None if self.max_new_tokens is None else self.max_new_tokens - len(generated)
            chosen = self.chooser.choose(text, generated, token, None, probs[row], remaining)
            scores[row].fill_(float("-inf"))
            scores[row, chosen] = 0.0
        return scores


def generate(model, tokenizer, prompts: list[str], *, n: int = 1, temperature: float = 0.0, seed: int = 0,
             max_new_tokens: int = 256, batch_size: int = 8, system: str | None = None,
             progress_bar=None, grammar: str | None = None) -> list[list[str]]:
    """n responses per prompt. Batched with left padding; sampling is seeded per batch, so the
    same seed, batch size and model give the same responses. `grammar`: a language pack name;
    every response's code is then kept a viable prefix of that language (`GrammarProcessor`)."""
    import torch
    from transformers import LogitsProcessorList

    # Left padding for batched generation; restored afterwards, since the training loop hands
    # in the tokenizer it will save with the run.
    sides = tokenizer.padding_side, tokenizer.truncation_side
    tokenizer.padding_side = "left"
    tokenizer.truncation_side = "left"  # an over-long prompt keeps its end: the question
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    window = int(getattr(model.config, "max_position_embeddings", 0) or getattr(model.config, "n_positions", 0) or 4096)
    max_prompt = max(16, window - max_new_tokens)
    texts = [chat_prompt(tokenizer, p, system) for p in prompts for _ in range(n)]
    stop = stop_token_ids(model, tokenizer)
    device = next(model.parameters()).device
    outputs: list[str] = []
    was_training = model.training
    model.eval()
    try:
        for b, start in enumerate(range(0, len(texts), batch_size)):
            chunk = texts[start:start + batch_size]
            enc = tokenizer(chunk, return_tensors="pt", padding=True, truncation=True, max_length=max_prompt,
                            add_special_tokens=False).to(device)
            new_tokens = max(1, min(max_new_tokens, window - enc["input_ids"].shape[1]))
            torch.manual_seed(seed * 100_003 + b)
            sampling = {"do_sample": True, "temperature": temperature, "top_p": 1.0, "top_k": 0} \
                if temperature > 0 else {"do_sample": False}
            if grammar:
                sampling = {"do_sample": False, "logits_processor": LogitsProcessorList(
                    [GrammarProcessor(grammar, tokenizer, stop, enc["input_ids"].shape[1], temperature, new_tokens)])}
            with torch.no_grad():
                out = _generate(model, enc, max_new_tokens=new_tokens, eos_token_id=stop,
                                pad_token_id=tokenizer.pad_token_id, **sampling)
            gen = out[:, enc["input_ids"].shape[1]:]
            outputs += tokenizer.batch_decode(gen, skip_special_tokens=True)
            if progress_bar is not None:
                progress_bar.advance(len(chunk))
    finally:
        model.train(was_training)
        tokenizer.padding_side, tokenizer.truncation_side = sides
    return [outputs[i * n:(i + 1) * n] for i in range(len(prompts))]


def _generate(model, enc, **kwargs):
    """`model.generate` with a static KV cache, allocated once for the whole answer: the same
    tokens as the default dynamic cache (tested), which grows by concatenation at every step —
    a fifth of the quickstart model's bench time on a CPU (4.5 → 3.6 s for 54 answers). A model
    whose cache cannot be static generates as it would by default."""
    try:
        return model.generate(**enc, cache_implementation="static", **kwargs)
    except (ValueError, NotImplementedError, TypeError):
        return model.generate(**enc, **kwargs)


def _system_prompt(manifest: dict) -> str | None:
    hp = manifest.get("hyperparameters") or {}
    return manifest.get("system_prompt") or (hp.get("system_prompt") if isinstance(hp, dict) else None)


def run_bench(model_path: str | Path, bench: str | Path, *, k: int = 1, n: int | None = None,
              temperature: float = 0.0, seed: int = 0, limit: int | None = None, max_new_tokens: int = 256,
              batch_size: int = 8, device: str = "auto", out: str | Path | None = None,
              train_data: list[str | Path] | None = None, grammar: str | None = None) -> dict[str, Any]:
    """Load the model, generate n (default k) samples per task, score, and write the results."""
    from mens.evaluate.checks import check_bench_args
    from mens.inference import load_model
    from mens.progress import progress, warn

    check_bench_args(model_path, bench, k=k, n=n, temperature=temperature, limit=limit, max_new_tokens=max_new_tokens,
                     batch_size=batch_size, device=device, out=out, train_data=train_data)
    n = n or k
    if k < 1 or n < k:
        raise MensError(f"need 1 <= k <= n samples (k={k}, n={n})", "-k/--samples", "draw at least k samples")
    if n > 1 and temperature <= 0:
        raise MensError("several samples per task need sampling", "--temperature",
                        "give --temperature > 0 (e.g. 0.8) or use -k 1")
    loaded = load_tasks(bench, limit)
    if not loaded:
        raise MensError("the bench holds no tasks", str(bench), "give a .jsonl file with one task a line")
    tasks = [t for t, _ in loaded]
    prompts = [t.full_prompt(d) for t, d in loaded]
    contamination = None
    if train_data:
        from mens.evaluate.contamination import find_contamination

        contamination = find_contamination(bench, train_data)
        for hit in contamination["hits"]:
            warn(f"warning: bench task {hit['id']} {hit['field']} appears in training data ({hit['where']})")
    from mens.hf import read_manifest
    from mens.positions import check_generation_fits, source_positions, source_tokenizer

    system = _system_prompt(read_manifest(model_path) if Path(model_path).is_dir() else {})
    check_generation_fits(source_tokenizer(model_path), prompts, positions=source_positions(model_path),
                          new_tokens=max_new_tokens, flag="--max-new-tokens", where=str(model_path), system=system)
    started = time.time()
    model, tokenizer, info = load_model(model_path, device=device)
    with progress("bench", total=len(prompts) * n) as bar:
        responses = generate(model, tokenizer, prompts, n=n, temperature=temperature, seed=seed,
                             max_new_tokens=max_new_tokens, batch_size=batch_size,
                             system=system, progress_bar=bar,
                             grammar=grammar)
    result = {"schema": "mens.benchmark_results.v1", "model": str(model_path), "bench": str(bench), "k": k,
              "n_samples": n, "temperature": temperature, "seed": seed, "max_new_tokens": max_new_tokens,
              "grammar": grammar,
              "device": info.get("device"), **score_bench(tasks, responses, k),
              "wall_time_s": round(time.time() - started, 2)}
    if contamination is not None:
        result["contamination"] = contamination
    # Keep the summary figures first in the file, the per-item detail last.
    result["items"] = result.pop("items")
    if out:
        write_json_atomic(out, result)
    return result


def bench_callback(model, tokenizer, bench_path: str | Path, k: int = 1, limit: int | None = 8,
                   max_new_tokens: int = 128, batch_size: int = 8, seed: int = 0,
                   system: str | None = None, rates: dict | None = None) -> float:
    """pass@1 of the model being trained on (the first `limit` tasks of) a bench — greedy when
    k == 1 — for `mens train --bench DIR --bench-every N`. Restores the model's train mode.
    `rates`: a dict to receive the other figures too (parse_rate, anti_stub_rate, …)."""
    loaded = load_tasks(bench_path, limit)
    prompts = [t.full_prompt(d) for t, d in loaded]
    responses = generate(model, tokenizer, prompts, n=k, temperature=0.0 if k == 1 else 0.8, seed=seed,
                         max_new_tokens=max_new_tokens, batch_size=batch_size, system=system)
    scores = score_bench([t for t, _ in loaded], responses, k)
    if rates is not None:
        rates.update({key: v for key, v in scores.items() if key not in ("items", "by_category")})
    return scores["pass_at_1"]
