"""examples/base/bench: the held-out Python bench of the from-scratch base. Every reference parses
with the Python pack, is of its task's category, holds its needles, passes the bench's own scoring
and does what its prompt asks (run on an example here); every name a task asks for is made up
(not in the standard library) and quoted in its prompt; no prompt holds another; its domains are
not the Vox bench's or the synthetic word lists'; and `mens bench` runs it end to end."""

from __future__ import annotations

import ast
import asyncio
import functools
import json
import os
import pathlib
import re
import sysconfig
import textwrap
from collections import Counter

from paths import EXAMPLES, REPO

from mens.corpus.pairs import fence
from mens.evaluate.bench import score_bench
from mens.evaluate.tasks import load_tasks
from mens.lang import get_pack

BENCH = EXAMPLES / "base" / "bench"
_DEFINES = re.compile(r"^(?:async def|def|class) (?!__)(\w+)$|^([A-Z][A-Z0-9_]+)$")  # not a dunder method


@functools.cache
def _tasks():
    return [task for task, _ in load_tasks(BENCH)]


def _names(task) -> list[str]:
    """The names a task asks for: its `def NAME` / `class NAME` / CONSTANT needles."""
    return [m.group(1) or m.group(2) for n in task.expect_contains if (m := _DEFINES.match(n))]


def test_the_bench_is_well_formed_broad_and_its_references_pass_it():
    tasks = _tasks()
    assert len(tasks) == 60 and len({t.id for t in tasks}) == 60
    counts = Counter(t.category for t in tasks)
    assert len(counts) == 12 and min(counts.values()) >= 3, counts
    for t in tasks:
        assert t.lang == "python" and not t.context_files and t.id.startswith(t.category + "-"), t.id
        assert 1 <= len(t.expect_contains) <= 3 and _names(t), t.id
        assert len(t.reference.splitlines()) <= 25, t.id
    # The bench's own scoring, on the references as a model would answer: each parses with the
    # Python pack, is no stub and holds every needle.
    scores = score_bench(tasks, [[fence(t.reference, get_pack("python"))] for t in tasks], k=1)
    failed = {it["id"]: it["samples"][0] for it in scores["items"] if not it["correct"]}
    assert scores["pass_at_1"] == 1.0, failed


def _node(tree: ast.Module, name: str):
    return next(n for n in tree.body if getattr(n, "name", None) == name)


def _has(node, *types) -> bool:
    return any(isinstance(n, types) for n in ast.walk(node))


def _decorators(node) -> list[str]:
    return [ast.unparse(d) for d in getattr(node, "decorator_list", [])]


def _is_decorator(tree, name) -> bool:
    """Applied as `@name` somewhere, or a function that returns a function it defines."""
    func = _node(tree, name)
    applied = any(d.split("(")[0] == name for n in ast.walk(tree) for d in _decorators(n))
    inner = {n.name for n in ast.walk(func) if isinstance(n, ast.FunctionDef) and n is not func}
    return applied or any(isinstance(r, ast.Return) and isinstance(r.value, ast.Name) and r.value.id in inner
                          for r in ast.walk(func))


def _is_context_manager(tree, name) -> bool:
    node = _node(tree, name)
    methods = {n.name for n in getattr(node, "body", []) if isinstance(n, ast.FunctionDef)}
    return {"__enter__", "__exit__"} <= methods or any("contextmanager" in d for d in _decorators(node)) \
        or _has(node, ast.With)


_CATEGORY = {  # what the category means of the construct a task names (the pack tells its kind)
    "generator": lambda tree, name: _has(_node(tree, name), ast.Yield, ast.YieldFrom),
    "async_function": lambda tree, name: True,
    "dataclass": lambda tree, name: any("dataclass" in d for d in _decorators(_node(tree, name))),
    "decorator": _is_decorator,
    "context_manager": _is_context_manager,
    "exception": lambda tree, name: _has(tree, ast.Raise, ast.Try),
    "comprehension": lambda tree, name: _has(_node(tree, name), ast.ListComp, ast.SetComp, ast.DictComp,
                                             ast.GeneratorExp),
    "type_hints": lambda tree, name: _has(tree, ast.AnnAssign) or any(
        f.returns is not None for f in ast.walk(tree) if isinstance(f, ast.FunctionDef)),
    "algorithm": lambda tree, name: _has(_node(tree, name), ast.While, ast.For),
    "function": lambda tree, name: True,
    "class": lambda tree, name: True,
    "module": lambda tree, name: any(isinstance(n, (ast.Assign, ast.AnnAssign, ast.If)) for n in tree.body),
}


def test_every_reference_is_of_its_category():
    pack = get_pack("python")
    for t in _tasks():
        kinds = {c.name: c.kind for c in pack.analyze(t.reference).constructs}
        tree = ast.parse(t.reference)
        for needle, name in zip((n for n in t.expect_contains if _DEFINES.match(n)), _names(t)):
            want = {"async": "async_function", "def": "function", "class": "class"}.get(needle.split()[0], "const")
            assert kinds.get(name) == want, (t.id, name, kinds)
        first = _names(t)[0]
        if t.category in ("class", "dataclass"):
            assert kinds[first] == "class", t.id
        if t.category == "async_function":
            assert kinds[first] == "async_function", t.id
        assert _CATEGORY[t.category](tree, first), t.id


def _raises(exc, fn, *args) -> bool:
    try:
        fn(*args)
    except exc:
        return True
    return False


# One example run of each reference: the reference does what its prompt asks.
CHECKS = {
    "function-kiln": "assert kiln_cooldown_minutes(1200, 100, 50) == 22 and kiln_cooldown_minutes(130, 100, 20) == 2 "
                     "and kiln_cooldown_minutes(90, 100, 5) == 0",
    "function-yarn": "assert (skeins_to_buy(250, 100), skeins_to_buy(200, 100), skeins_to_buy(0, 100)) == (3, 2, 0)",
    "function-regatta": "assert regatta_callsign('wyc', 7) == 'WYC-007' and regatta_callsign('Ryc', 123) == 'RYC-123'",
    "function-quilt": "assert quilt_initials('log cabin star') == 'LCS' and quilt_initials(' flying  geese ') == 'FG'",
    "function-philately": "assert stamps_by_country([('NO', 1950), ('FR', 1901), ('NO', 1977)]) == {'NO': 2, 'FR': 1}",
    "function-caving": "assert deepest_point([-5, -10, 4, -12]) == -23 and deepest_point([3, 2]) == deepest_point([]) == 0",
    "function-balloon": "assert (minutes_to_land(0.5), minutes_to_land(1), minutes_to_land(100)) == (0, 1, 44)",
    "function-climbing": "assert route_length([30, [20, [5, 5]], 10]) == 70 and route_length([]) == 0",
    "function-origami": "assert origami_layers(0) == 1 and origami_layers(5) == 32",
    "function-campanology": "r = [1, 2, 3, 4, 5]\nassert hunt_swap(r) == [2, 1, 4, 3, 5] and r == [1, 2, 3, 4, 5]",
    "function-canal": "assert lock_fill_seconds(200, 3, 4) == 150.0 and lock_fill_seconds(10, 1, 4) == 2.5",
    "function-foraging": "assert heaviest_species({'chanterelle': 120, 'porcini': 300}) == 'porcini'\n"
                         "assert heaviest_species({}) is None",
    "function-falconry": "assert flying_weight_ok([700, 712, 690], 700) and flying_weight_ok([], 700)\n"
                         "assert not flying_weight_ok([700, 716], 700)",
    "function-marathon": "assert pace_label(305) == '5:05 /km' and pace_label(600) == '10:00 /km'",
    "class-glassblowing": "log = FurnaceLog()\nassert log.peak() is None and len(log) == 0\n"
                          "log.add(1090); log.add(1130); log.add(1100)\nassert log.peak() == 1130 and len(log) == 3",
    "class-rowing": "shed = BoatShed(['Swift', 'Alder', 'Heron'])\nshed.lend('Heron')\n"
                    "assert shed.available() == ['Alder', 'Swift'] and raises(KeyError, shed.lend, 'Heron')\n"
                    "shed.give_back('Heron')\nassert shed.available() == ['Alder', 'Heron', 'Swift']",
    "class-puppetry": "cast = PuppetCast('The Fox')\nassert cast.hands_needed() == 0\n"
                      "cast.add_puppet('fox', 2); cast.add_puppet('crow', 1)\nassert cast.hands_needed() == 3",
    "class-lanterns": "s = LanternString(['red', 'gold'])\nassert list(s) == ['red', 'gold'] "
                      "and repr(s) == 'LanternString(2 lanterns)'",
    "class-shearing": "t = ShearingTally.from_counts({'Ana': 3, 'Ben': 4})\nt.record('Ana'); t.record('Ana')\n"
                      "assert t.leader() == 'Ana' and ShearingTally().leader() is None",
    "class-windmill": "assert GrainMill(2).flour_per_hour() == 80 and WindGrainMill(2, 3.5).flour_per_hour() == 0\n"
                      "assert WindGrainMill(3, 6).flour_per_hour() == 120 and issubclass(WindGrainMill, GrainMill)",
    "dataclass-seedbank": "p = SeedPacket('flax', 12.5, 2020)\nassert p.is_viable(2025) and not p.is_viable(2026)\n"
                          "assert p == SeedPacket('flax', 12.5, 2020)",
    "dataclass-cheese": "import dataclasses\nw = CheeseWheel('Alpkase', 8.0, 14)\n"
                        "assert w.is_mature and not CheeseWheel('Tomme', 2.0, 3).is_mature\n"
                        "assert raises(dataclasses.FrozenInstanceError, setattr, w, 'kilos', 1)",
    "dataclass-dogsled": "a, b = SledTeam('Kari'), SledTeam('Nils')\na.add_dog('Balto')\n"
                         "assert a.size() == 1 and b.size() == 0",
    "dataclass-scuba": "assert DiveLog(18.0, 42).minutes == 42 and raises(ValueError, DiveLog, -1, 10)",
    "generator-compost": "assert list(compost_temperatures(58, 4)) == [58, 61, 64, 65]",
    "generator-pottery": "assert list(glaze_batches(list('abcde'), 2)) == [['a', 'b'], ['c', 'd'], ['e']]",
    "generator-bellringing": "assert list(peal_sequence([[1, 2], [2, 1], []])) == [1, 2, 2, 1]",
    "generator-rowing": "assert list(stroke_splits([9, 10, 8])) == [(1, 9), (2, 19), (3, 27)]",
    "generator-kites": "import itertools\n"
                       "assert list(itertools.islice(kite_line_lengths(10, 5), 4)) == [10, 15, 20, 25]",
    "decorator-juggling": "assert toss_club('red') == 'RED' and toss_club('blue') == 'BLUE'\n"
                          "assert toss_club.calls == 2 and toss_club.__name__ == 'toss_club'",
    "decorator-caving": """
        tries = []
        @retry_descent(3)
        def flaky():
            tries.append(1)
            if len(tries) < 3:
                raise OSError('rope')
            return 'down'
        assert flaky() == 'down' and len(tries) == 3 and flaky.__name__ == 'flaky'
        def frayed():
            raise OSError('frayed')
        assert raises(OSError, retry_descent(2)(frayed))
    """,
    "decorator-origami": "assert FOLD_REGISTRY['valley_fold'] is valley_fold and valley_fold('s') == 'sv'\n"
                         "crane = register_fold(lambda x: x)\nassert FOLD_REGISTRY['<lambda>'] is crane",
    "decorator-marathon": "result, seconds = split_timer(lambda a, b: a + b)(2, 3)\n"
                          "assert result == 5 and 0 <= seconds < 1",
    "context_manager-darkroom": """
        s = DarkroomSession()
        with s as inside:
            assert inside is s and s.safelight
        try:
            with s:
                raise RuntimeError('fogged')
        except RuntimeError:
            pass
        assert not s.safelight
    """,
    "context_manager-forge": """
        f = {}
        try:
            with forge_heat(f):
                assert f['lit']
                raise ValueError
        except ValueError:
            pass
        assert f['lit'] is False
    """,
    "context_manager-birdwatch": "path = tmp / 'tally.txt'\npath.write_text('wren\\nrobin\\n wren \\n')\n"
                                 "assert count_sightings(str(path), 'wren') == 2 and count_sightings(str(path), 'owl') == 0",
    "context_manager-candles": """
        g = WickGuard()
        with g:
            raise ValueError('too short')
        assert g.swallowed == 'too short'
        try:
            with WickGuard():
                raise KeyError('x')
            raise AssertionError('swallowed')
        except KeyError:
            pass
    """,
    "exception-philately": "a = {1: []}\nmount_stamp(a, 1, 'Penny Black')\nassert a == {1: ['Penny Black']}\n"
                           "assert raises(StampHingeError, mount_stamp, a, 2, 'x') and issubclass(StampHingeError, ValueError)",
    "exception-climbing": "assert parse_rope_length('60m') == 60 and parse_rope_length(' 70 ') == 70\n"
                          "assert parse_rope_length('long') is None",
    "exception-archery": "assert ring_points(1) == 10 and ring_points(10) == 1\n"
                         "assert raises(ValueError, ring_points, 0) and raises(ValueError, ring_points, 11)",
    "exception-campanology": "b = {'treble': 250, 'tenor': 1200}\n"
                             "assert bell_weight(b, 'tenor') == 1200 and raises(UnknownBellError, bell_weight, b, 'x')",
    "exception-balloon": "log = []\nassert safe_burn_ratio(30, 60, log) == 0.5 and safe_burn_ratio(5, 0, log) == 0.0\n"
                         "assert log == ['checked', 'checked']",
    "comprehension-mosaic": "assert small_tile_colours([('blue', 10), ('red', 25), ('gold', 19)]) == ['blue', 'gold']",
    "comprehension-cheese": "assert kilos_by_cheese(['brie', 'feta', 'gouda'], [2, 0, 5.5]) == {'brie': 2, 'gouda': 5.5}",
    "comprehension-yarn": "assert dye_palette([{'colour': 'Teal'}, {'colour': 'teal'}, {'colour': 'Ochre'}]) == "
                          "{'teal', 'ochre'}",
    "comprehension-quilt": "assert patch_coordinates([['star', 'plain'], ['plain', 'star']], 'star') == [(0, 0), (1, 1)]",
    "type_hints-canal": "assert barges_by_cargo([('Ada', 'coal'), ('Bea', 'grain'), ('Cy', 'coal')]) == "
                        "{'coal': ['Ada', 'Cy'], 'grain': ['Bea']}",
    "type_hints-archery": "a, b = ArrowFlight('Ida', 70, 8), ArrowFlight('Jo', 50, 10)\n"
                          "assert best_flight([a, b]) == b and best_flight([]) is None and tuple(a) == ('Ida', 70, 8)",
    "type_hints-pottery": "assert apply_glaze(['jug', 'bowl'], str.upper) == ['JUG', 'BOWL']",
    "async_function-kiln": "import itertools\nc = itertools.count(900, 10)\n"
                           "assert run(poll_kiln(lambda: next(c), 3)) == [900, 910, 920]",
    "async_function-foraging": "async def weigh(b):\n    return len(b)\n"
                               "assert run(weigh_baskets(['ab', 'cde'], weigh)) == 5",
    "async_function-lanterns": "async def collect():\n    return [c async for c in lantern_feed(['jade', 'amber'])]\n"
                               "assert run(collect()) == ['jade', 'amber']",
    "async_function-dogsled": """
        state = {'now': 0, 'most': 0}
        async def run_one(team):
            state['now'] += 1
            state['most'] = max(state['most'], state['now'])
            await asyncio.sleep(0)
            state['now'] -= 1
            return team.upper()
        assert run(run_sled_teams(['a', 'b', 'c', 'd'], run_one)) == ['A', 'B', 'C', 'D'] and state['most'] == 2
    """,
    "module-quilt": "assert fabric_per_block_cm() == 31.5",
    "module-climbing": "assert harder_grade('5a', '6a') == '6a' and harder_grade('5b', '4') == '5b'",
    "module-kiln": "assert kiln_report([1100, 1240, 1180]) == 'peak 1240 C over 3 readings'",
    "algorithm-balloon": "a = [100, 250, 250, 900]\nassert [first_altitude_at_least(a, x) for x in (250, 50, 1000)] == [1, 0, 4]\n"
                         "assert first_altitude_at_least([], 1) == 0",
    "algorithm-windmill": "assert (cog_common_divisor(48, 18), cog_common_divisor(17, 5), cog_common_divisor(0, 9)) == (6, 1, 9)",
    "algorithm-rowing": "x = [402.5, 398.1, 410.0, 398.1]\n"
                        "assert insertion_sort_times(x) is x and x == [398.1, 398.1, 402.5, 410.0]",
    "algorithm-caving": "m = {'mouth': ['hall', 'crawl'], 'hall': ['lake'], 'crawl': ['hall'], 'lake': []}\n"
                        "assert cave_hops(m, 'mouth', 'lake') == 2 and cave_hops(m, 'mouth', 'mouth') == 0\n"
                        "assert cave_hops(m, 'lake', 'mouth') == -1",
}


def test_every_reference_does_what_its_prompt_asks(tmp_path):
    tasks = _tasks()
    assert set(CHECKS) == {t.id for t in tasks}
    for t in tasks:
        space = {"__name__": "bench_reference", "raises": _raises, "run": asyncio.run, "asyncio": asyncio,
                 "tmp": tmp_path}
        # dont_inherit: run as a model's answer would, not under this file's `annotations` import
        exec(compile(t.reference, t.id, "exec", dont_inherit=True), space)
        exec(compile(textwrap.dedent(CHECKS[t.id]), f"{t.id} (check)", "exec", dont_inherit=True), space)


def _stdlib_sources() -> bytes:
    """Every .py file of the running interpreter's standard library (31 MB for 3.11), as one
    bytes object: searched as bytes, twice as fast as decoded. Its own site-packages are left
    out: what pip installed there is not the standard library."""
    parts = []
    for folder, subdirs, files in os.walk(sysconfig.get_paths()["stdlib"]):
        subdirs[:] = [d for d in subdirs if d not in ("site-packages", "dist-packages")]
        parts += [pathlib.Path(folder, f).read_bytes() for f in files if f.endswith(".py")]
    return b"\n".join(parts)


def test_names_are_made_up_and_copied_from_the_prompt():
    """A model trained on the standard library cannot write a task's name from memory: it must
    copy it from the request (README.md says how the installed packages were checked too)."""
    stdlib = _stdlib_sources()
    assert b"def bisect_right" in stdlib  # the walk did find the standard library
    for t in _tasks():
        quoted = " ".join(re.findall(r"`([^`]+)`", t.prompt))
        for name in _names(t):
            assert re.search(rf"\b{name}\b", quoted), (t.id, name)
            assert name.encode() not in stdlib, (t.id, name)


def _normalise(text: str) -> str:
    return " ".join(text.lower().split())


def test_prompts_are_distinct_in_many_voices_and_about_new_domains():
    prompts = [_normalise(t.prompt) for t in _tasks()]
    for i, a in enumerate(prompts):
        assert not any(a in b for j, b in enumerate(prompts) if j != i), a
    # The Python pack's pair voices ("Write a Python function `x`: …") and others, neither the most.
    pack_voice = re.compile(r"^(write a python \w+ `|in python, define the \w+ `|.*implement it in python as the )")
    n = sum(bool(pack_voice.match(p)) for p in prompts)
    assert 8 <= n <= len(prompts) // 2, n
    vox = (EXAMPLES / "bench" / "vox_heldout.jsonl").read_text(encoding="utf-8").lower()
    words = (REPO / "src" / "mens" / "corpus" / "synth" / "words.py").read_text(encoding="utf-8").lower()
    for t in _tasks():
        domain = t.id.split("-", 1)[1].rstrip("s")
        assert not re.search(rf"\b{domain}", vox + words), t.id


def test_mens_bench_runs_the_python_bench_end_to_end(tmp_path, tiny_model_dir, run_cli):
    out = tmp_path / "results.json"
    code, _, err = run_cli("bench", "--model", tiny_model_dir, "--bench", BENCH, "--max-new-tokens", "4",
                           "--batch-size", "60", "--device", "cpu", "-o", out)
    assert code == 0, err
    res = json.loads(out.read_text())
    assert res["n_tasks"] == 60 and {it["lang"] for it in res["items"]} == {"python"}
    assert set(res["by_category"]) == {t.category for t in _tasks()}
    assert all(len(it["samples"]) == 1 for it in res["items"]) and 0.0 <= res["parse_rate"] <= 1.0
