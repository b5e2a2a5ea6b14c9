import itertools
import json

import pytest

from families import FAMILIES, WINDOW, tiny_family_dir
from mens.evaluate.bench import bench_callback, pass_at_k, score_bench, score_sample, stub_reason
from mens.evaluate.tasks import BenchTask

PY_TASK = BenchTask(id="t1", category="function", prompt="Write add.", expect_contains=["def add", "return"],
                    lang="python")


@pytest.mark.parametrize("n,c,k", [(1, 0, 1), (1, 1, 1), (5, 2, 1), (5, 2, 3), (10, 3, 5), (6, 0, 2), (6, 6, 4)])
def test_pass_at_k_matches_direct_enumeration(n, c, k):
    outcomes = [True] * c + [False] * (n - c)
    subsets = list(itertools.combinations(outcomes, k))
    direct = sum(any(s) for s in subsets) / len(subsets)
    assert pass_at_k(n, c, k) == pytest.approx(direct)


def test_scoring_parse_stub_semantic():
    good = "Here you go:\n```python\ndef add(a, b):\n    return a + b\n```\nDone."
    s = score_sample(good, PY_TASK)
    assert (s.parses, s.stub_reason, s.missing, s.passed) == (True, None, [], True)
    assert s.code == "def add(a, b):\n    return a + b"

    broken = score_sample("def add(a, b)\n    return a + b", PY_TASK)  # no fence: the whole response
    assert not broken.parses and broken.parse_message and not broken.passed

    stub = score_sample("```python\ndef add(a, b):\n    pass\n```", PY_TASK)
    assert stub.parses and stub.stub_reason and not stub.passed and stub.missing == ["return"]

    todo = score_sample("def add(a, b):\n    # TODO: implement\n    return 0", PY_TASK)
    assert todo.parses and "TODO" in todo.stub_reason and not todo.passed

    wrong = score_sample("def sub(a, b):\n    return a - b", PY_TASK)
    assert wrong.parses and wrong.stub_reason is None and wrong.missing == ["def add"] and not wrong.passed

    assert score_sample("", PY_TASK).parse_message == "no code in the response"
    assert not score_sample("```\n# just a comment\n```", PY_TASK).parses  # an empty file is not an answer

    # Generation cut off inside the fence it opened: the code is what follows the opening line.
    cut = score_sample("Sure:\n```python\ndef add(a, b):\n    return a + b\n", PY_TASK)
    assert cut.code == "def add(a, b):\n    return a + b" and cut.passed


def test_stub_rules():
    assert stub_reason("fn f() {\n    ...\n}") == "placeholder marker '...'"
    assert stub_reason("@hole fn f() to int") == "placeholder marker '@hole'"
    assert stub_reason("fn f() {\n    unimplemented\n}").startswith("placeholder marker")
    assert stub_reason("// a comment\nfn f() to int { return 1 }") == "only 1 meaningful non-comment line(s)"
    assert stub_reason("type Todo {\n    title: str\n}") is None  # 'Todo' is a name, not a marker
    assert stub_reason("fn f() to int {\n    return 1\n}") is None


def test_summary_by_category_and_pass_at_k():
    tasks = [PY_TASK, BenchTask(id="t2", category="class", prompt="p", expect_contains=["class"], lang="python")]
    good, bad = "def add(a, b):\n    return a + b", "def add(a, b)\n  return"
    res = score_bench(tasks, [[good, bad, bad], [bad, bad, bad]], k=2)
    assert res["pass_at_1"] == pytest.approx((1 / 3 + 0) / 2)
    assert res["pass_at_k"] == pytest.approx((pass_at_k(3, 1, 2) + 0) / 2)
    assert res["parse_rate"] == pytest.approx(1 / 6)
    assert res["by_category"]["function"]["pass_at_1"] == pytest.approx(1 / 3)
    assert res["by_category"]["class"]["n_tasks"] == 1
    item = res["items"][0]
    assert item["correct"] == 1 and item["samples"][1]["parse_message"] and item["samples"][0]["response"] == good


def _bench_file(tmp_path):
    ctx = tmp_path / "ctx.py"
    ctx.write_text("def helper():\n    return 1\n")
    tasks = [{"id": f"b{i}", "category": ["function", "class"][i % 2], "prompt": f"Write function number {i}.",
              "expect_contains": ["def"], "context_files": ["ctx.py"] if i == 0 else [], "lang": "python"}
             for i in range(3)]
    path = tmp_path / "bench.jsonl"
    path.write_text("".join(json.dumps(t) + "\n" for t in tasks))
    return path


def test_bench_end_to_end_on_a_tiny_model_is_deterministic(tmp_path, tiny_model_dir, run_cli):
    bench = _bench_file(tmp_path)
    runs = []
    for name in ("a", "b"):
        out = tmp_path / f"{name}.json"
        code, stdout, err = run_cli("bench", "--model", tiny_model_dir, "--bench", bench, "-k", "2", "-n", "3",
                                    "--temperature", "0.9", "--seed", "7", "--max-new-tokens", "12",
                                    "--batch-size", "4", "-o", out, "--device", "cpu")
        assert code == 0, err
        runs.append(json.loads(out.read_text()))
    a, b = runs
    assert a["n_tasks"] == 3 and a["n_samples"] == 3 and a["k"] == 2
    assert set(a["by_category"]) == {"function", "class"}
    assert [s["response"] for it in a["items"] for s in it["samples"]] == \
        [s["response"] for it in b["items"] for s in it["samples"]]
    assert all(len(it["samples"]) == 3 for it in a["items"])
    assert 0.0 <= a["pass_at_1"] <= a["pass_at_k"] <= 1.0
    assert "pass@2" in stdout


def test_bench_callback_and_user_errors(tmp_path, tiny_model_dir, run_cli):
    from mens.inference import load_model

    bench = _bench_file(tmp_path)
    model, tok, _ = load_model(tiny_model_dir, device="cpu")
    model.train()
    value = bench_callback(model, tok, bench, limit=2, max_new_tokens=8)
    assert 0.0 <= value <= 1.0 and model.training  # train mode restored

    # k = 1: the summary names pass@1 once (not "pass@1 … pass@1 …").
    code, stdout, err = run_cli("bench", "--model", tiny_model_dir, "--bench", bench, "--limit", "1",
                                "--max-new-tokens", "4", "-o", tmp_path / "k1.json", "--device", "cpu")
    assert code == 0, err
    assert stdout.splitlines()[0].count("pass@") == 1

    code, _, err = run_cli("bench", "--model", tiny_model_dir, "--bench", bench, "-k", "2", "-o", tmp_path / "x.json")
    assert code == 2 and "--temperature" in err
    code, _, err = run_cli("bench", "--model", tiny_model_dir, "--bench", tmp_path / "none")
    assert code == 2 and "bench not found" in err


def test_grammar_mode_keeps_every_answer_a_viable_prefix(tiny_model_dir):
    """`generate(..., grammar="vox")` (the bench's grammar mode): a random model's answers, which
    are never Vox, become code the Vox pack accepts as far as it goes."""
    from mens.evaluate.bench import code_of, generate
    from mens.inference import load_model
    from mens.lang import get_pack

    model, tok, _ = load_model(tiny_model_dir, device="cpu")
    prompts = ["Write a Vox function that adds two ints.", "Define a Vox type for a point."]
    free = generate(model, tok, prompts, max_new_tokens=12, batch_size=2)
    constrained = generate(model, tok, prompts, max_new_tokens=12, batch_size=2, grammar="vox")
    pack = get_pack("vox")
    assert all(pack.viable_prefix(code_of(r[0])) for r in constrained)
    assert len(free) == len(constrained) == 2


@pytest.mark.parametrize("fixture", ["tiny_model_dir", "tiny_llama_dir"])
def test_static_cache_answers_as_the_default_cache_does(fixture, request):
    """bench generates with a static KV cache (bench._generate): the same greedy and sampled
    tokens as generate's default dynamic cache, prompts of different lengths left-padded."""
    import torch

    from mens.evaluate.bench import _generate
    from mens.inference import load_model

    model, tok, _ = load_model(request.getfixturevalue(fixture), device="cpu")
    tok.padding_side = "left"
    enc = tok(["fn main", "type Point { x: int }\nfn area(p: Point) to int {"], return_tensors="pt", padding=True)
    for sampling in ({"do_sample": False}, {"do_sample": True, "temperature": 0.8, "top_k": 0}):
        torch.manual_seed(3)
        got = _generate(model, enc, max_new_tokens=12, pad_token_id=tok.pad_token_id, **sampling)
        torch.manual_seed(3)
        want = model.generate(**enc, max_new_tokens=12, pad_token_id=tok.pad_token_id, **sampling)
        assert torch.equal(got, want)


def test_bench_with_its_base_records_what_the_fine_tune_lost_and_gained(tmp_path, tiny_model_dir, tiny_llama_dir,
                                                                         run_cli):
    """`mens bench --base`: both models benched alike, the comparison the gates judge written once;
    a model against itself loses and gains nothing (greedy answers are deterministic)."""
    bench = _bench_file(tmp_path)
    out = tmp_path / "res.json"
    common = ("--bench", bench, "--max-new-tokens", "8", "--batch-size", "3", "--device", "cpu", "-o", out)
    code, stdout, err = run_cli("bench", "--model", tiny_model_dir, "--base", tiny_model_dir, *common)
    assert code == 0, err
    res = json.loads(out.read_text())
    assert res["base"]["model"] == str(tiny_model_dir) and res["base"]["n_tasks"] == 3
    assert res["vs_base"]["parse"]["lost"] == res["vs_base"]["parse"]["gained"] == 0
    assert res["vs_base"]["parse"]["p_value"] == res["vs_base"]["pass"]["p_value"] == 1.0
    assert list(res)[-1] == "items" and "vs base: parses lost 0, gained 0 (sign test p 1)" in stdout

    # Another model as the base: the comparison of the two models benched one at a time.
    from mens.evaluate.compare import compare_to_base

    code, _, err = run_cli("bench", "--model", tiny_model_dir, "--base", tiny_llama_dir, *common)
    assert code == 0, err
    res = json.loads(out.read_text())
    alone = tmp_path / "base.json"
    assert run_cli("bench", "--model", tiny_llama_dir, *common[:-1], alone)[0] == 0
    base = json.loads(alone.read_text())
    assert res["base"]["parse_rate"] == base["parse_rate"] and res["vs_base"] == compare_to_base(base, res)

    # A base that is not there is refused before either model loads, and nothing is written.
    out.unlink()
    code, _, err = run_cli("bench", "--model", tiny_model_dir, "--base", tmp_path / "missing", *common)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "missing" in err, err
    assert not out.exists()


@pytest.mark.parametrize("family", list(FAMILIES))
def test_bench_answers_as_generate_does_for_every_family(family):
    """bench's left-padded batch with a static KV cache (bench._generate) answers, greedy, what
    `generate` answers for each prompt alone with its default cache, for every family: Gated
    DeltaNet states (Qwen3.5, Qwen3-Next) and prompts longer than the window of 16 included."""
    import torch

    from mens.chat_template import chat_prompt, stop_token_ids
    from mens.evaluate.bench import generate
    from mens.inference import load_model

    model, tok, _ = load_model(tiny_family_dir(family), device="cpu")
    prompts = ["Write a Vox function that adds two numbers, and explain how match works in Vox.", "fn"]
    got = generate(model, tok, prompts, max_new_tokens=8)
    stop = stop_token_ids(model, tok)
    for prompt, [answer] in zip(prompts, got):
        ids = tok(chat_prompt(tok, prompt, None), return_tensors="pt", add_special_tokens=False)
        assert ids.input_ids.shape[1] > WINDOW
        with torch.no_grad():
            out = model.generate(**ids, max_new_tokens=8, do_sample=False, eos_token_id=stop,
                                 pad_token_id=tok.pad_token_id)
        assert answer == tok.decode(out[0, ids.input_ids.shape[1]:], skip_special_tokens=True)
