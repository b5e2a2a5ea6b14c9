"""`corpus mix`: weighted, seeded mixing of pair files into one training file (DESIGN.md §3).

    mix(config_path, *, allow_missing=False, lenient=False, output=None) -> Report   # mens corpus mix
    mix_pairs(cfg: MixConfig, *, allow_missing=False, lenient=False, output=None) -> Report
    load_config(config_path) -> MixConfig        parse_config(raw, base, where) -> MixConfig

mix.yaml: `sources: [{path, weight=1.0, optional=false, sample_rate?, record_format?, max_chars?}]`, `output`,
`seed`, `include_lanes`, `exclude_lanes`, `shuffle=true`. Relative paths are relative to the
config file's folder; a `path` ending in `.parquet` is read with pyarrow, and `hf:ORG/NAME[:SPLIT]`
is a Hub dataset read with `datasets` (online only). `record_format` is `auto` (each file's first
row decides) or one of `mens.formats.FORMATS`; every row of a source must be in that one format,
and is written out in the pair contract. A weight of 2.5 emits each row 2 or 3 times (floor plus a seeded Bernoulli
draw; at most 100), so the expected share is exact and the output reproducible. Strict by default: a missing
non-optional source or a malformed row fails the mix (`allow_missing` / `lenient` relax that).
A source's `max_chars` drops its rows longer than that (prompt and response, turns or text) (counted as
`too_long`): a row cut to fit the training window loses its end, and with it the end-of-turn a
model learns to stop at.
A caller that already holds the spec (`mens pipeline`) builds a `MixConfig` with `parse_config`
and calls `mix_pairs`, with no YAML in between. The report `<output stem>.mix_report.json`
records the spec in its fingerprint and lists per source: path, fingerprint, input rows,
emitted rows, share of output, skipped reason.
"""

from __future__ import annotations

import json
import math
import os
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


from mens.fingerprint import file_hash, fingerprint_block
from mens.corpus.report import Report
from mens.errors import MensError, refuse_unknown_keys
from mens.corpus.stages import CORPUS_CODE
from mens.files import check_not_input
from mens.flags import add_flag
from mens.progress import progress, say
from mens.stage import Command, Context, Stage
from mens.formats import FORMATS
from mens.records import HUB_PREFIX, hub_dataset, iter_pairs

RECORD_FORMATS = ("auto", *FORMATS)
# Each row is emitted about `weight` times: a weight of 1e9 (a typo) would exhaust the memory
# before anything is written. 100 copies of a row is already far past any useful mix.
MAX_WEIGHT = 100.0
_SOURCE_KEYS = {"path", "weight", "optional", "sample_rate", "record_format", "max_chars"}
_TOP_KEYS = {"sources", "output", "seed", "include_lanes", "exclude_lanes", "shuffle"}


@dataclass
class MixSource:
    path: Path | str          # a file, or a Hub dataset id `hf:ORG/NAME[:SPLIT]`
    weight: float = 1.0
    optional: bool = False
    sample_rate: float | None = None
    record_format: str = "auto"
    max_chars: int | None = None  # rows longer than this (prompt + response) are dropped


@dataclass
class MixConfig:
    sources: list[MixSource]
    output: Path
    seed: int = 0
    include_lanes: list[str] = field(default_factory=list)
    exclude_lanes: list[str] = field(default_factory=list)
    shuffle: bool = True


def _num(value: Any, key: str, where: str, low: float, high: float | None = None) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or value < low or (high is not None and value > high):
        bound = f"between {low} and {high}" if high is not None else f">= {low}"
        raise MensError(f"'{key}' must be a number {bound}, got {value!r}", where, "fix mix.yaml")
    return float(value)


def _flag(value: Any, key: str, where: str, default: bool) -> bool:
    if value is None:
        return default
    if not isinstance(value, bool):
        raise MensError(f"'{key}' must be true or false, got {value!r}", where, "fix mix.yaml")
    return value


def load_config(config_path: str | Path) -> MixConfig:
    """A mix.yaml → MixConfig; relative paths in it are relative to its folder."""
    from mens.files import read_yaml

    path = Path(config_path)
    raw = read_yaml(path, "mix config", "give a mix.yaml (see docs/corpus.md)")
    return parse_config(raw, path.parent, str(path))


def parse_config(raw: Any, base: Path, where: str) -> MixConfig:
    """A mix spec as plain data (mix.yaml's keys) → a validated MixConfig. Relative paths are
    joined to `base`; errors name `where`."""
    if not isinstance(raw, dict):
        raise MensError("mix config must be a mapping", where, "give sources: and output:")
    refuse_unknown_keys(raw, _TOP_KEYS, where)
    if not isinstance(raw.get("sources"), list) or not raw["sources"]:
        raise MensError("'sources' must be a non-empty list", where, "list the pair files to mix")
    if not isinstance(raw.get("output"), str):
        raise MensError("'output' must be a path", where, "say where train.jsonl goes")
    sources = []
    for i, src in enumerate(raw["sources"]):
        at = f"{where}: sources[{i}]"
        if isinstance(src, str):
            src = {"path": src}
        if not isinstance(src, dict) or not isinstance(src.get("path"), str):
            raise MensError("a source needs a 'path'", at, "write {path: …, weight: …}")
        refuse_unknown_keys(src, _SOURCE_KEYS, at, "source key")
        fmt = src.get("record_format", "auto")
        if fmt not in RECORD_FORMATS:
            raise MensError(f"record_format must be one of {', '.join(RECORD_FORMATS)}", at, "fix mix.yaml")
        rate, most = src.get("sample_rate"), src.get("max_chars")
        if most is not None and (isinstance(most, bool) or not isinstance(most, int) or most < 1):
            raise MensError(f"'max_chars' must be a whole number of characters >= 1, got {most!r}", at, "fix mix.yaml")
        sources.append(MixSource(_join(base, src["path"]), _num(src.get("weight", 1.0), "weight", at, 0.0, MAX_WEIGHT),
                                 _flag(src.get("optional"), "optional", at, False),
                                 None if rate is None else _num(rate, "sample_rate", at, 0.0, 1.0), fmt, most))
    lanes = {}
    for key in ("include_lanes", "exclude_lanes"):
        value = raw.get(key) or []
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise MensError(f"'{key}' must be a list of lane names", where, "fix mix.yaml")
        lanes[key] = value
    seed = raw.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise MensError("'seed' must be an integer", where, "fix mix.yaml")
    return MixConfig(sources, _join(base, raw["output"]), seed,
                     shuffle=_flag(raw.get("shuffle"), "shuffle", where, True), **lanes)


def _join(base: Path, path: str) -> Path | str:
    """`base/path` with `..` folded, so reports show `out/x.jsonl`, not `examples/../out/x.jsonl`;
    a Hub dataset id (`hf:…`) stays as it is."""
    if path.startswith(HUB_PREFIX):
        return path
    return Path(os.path.normpath(base / path))


def _source_hash(path: Path | str) -> str | None:
    """A file's content hash, or a Hub dataset's own fingerprint (its revision and files)."""
    if isinstance(path, str):
        return f"hub:{hub_dataset(path)._fingerprint}"
    return file_hash(path) if path.is_file() else None


def mix(config_path: str | Path, *, allow_missing: bool = False, lenient: bool = False,
        output: str | Path | None = None) -> Report:
    """`mens corpus mix --config`: the mix.yaml's spec, mixed; the file's hash joins the report's
    fingerprint inputs."""
    return mix_pairs(load_config(config_path), allow_missing=allow_missing, lenient=lenient, output=output,
                     where=str(config_path), inputs={str(config_path): file_hash(config_path)})


def mix_pairs(cfg: MixConfig, *, allow_missing: bool = False, lenient: bool = False,
              output: str | Path | None = None, where: str = "mix config",
              inputs: dict[str, str] | None = None) -> Report:
    """Mix `cfg.sources` into `output` (default `cfg.output`) and write the report beside it.
    `where` names the spec in errors; `inputs` are further {path: hash} the output depends on."""
    out = Path(output) if output else cfg.output
    for src in cfg.sources:
        if isinstance(src.path, Path) and src.path.is_dir():
            raise MensError("mix source is a folder, not a file", str(src.path), "give a .jsonl or .parquet file")
        if isinstance(src.path, Path) and out.exists() and src.path.exists() and out.resolve() == src.path.resolve():
            raise MensError("the mix output would overwrite its source", str(out), "write the mix to another file")
    report = Report("mix", str(out))
    rng = random.Random(cfg.seed)
    rows: list[dict] = []
    per_source: list[dict[str, Any]] = []
    hashes: dict[str, str] = dict(inputs or {})
    with progress("mix", total=len(cfg.sources)) as bar:
        for src in cfg.sources:
            entry = {"path": str(src.path), "weight": src.weight, "max_chars": src.max_chars, "fingerprint": None, "input_rows": 0,
                     "emitted_rows": 0, "share": 0.0, "skipped_reason": None}
            per_source.append(entry)
            bar.advance()
            fingerprint = _source_hash(src.path)
            if fingerprint is None:
                if not (src.optional or allow_missing):
                    raise MensError("mix source not found", str(src.path),
                                    "create it (run the earlier stages), mark it optional: true, "
                                    "or pass --allow-missing-sources")
                entry["skipped_reason"] = "missing (optional)" if src.optional else "missing (allowed)"
                report.drop("missing_source", str(src.path), entry["skipped_reason"])
                continue
            entry["fingerprint"] = hashes[str(src.path)] = fingerprint
            skipped: list[str] | None = [] if lenient else None
            for at, pair in iter_pairs(src.path, src.record_format, skipped):
                entry["input_rows"] += 1
                lane = pair.lane or "codegen"
                # The draws below happen for every row in a fixed order, so a seed fixes the output.
                keep = src.sample_rate is None or rng.random() < src.sample_rate
                copies = int(src.weight) + (1 if rng.random() < src.weight - int(src.weight) else 0)
                if (cfg.include_lanes and lane not in cfg.include_lanes) or lane in cfg.exclude_lanes:
                    report.drop("lane_filtered", at, f"lane {lane}")
                    continue
                if not keep:
                    report.counts["sampled_out"] += 1
                    continue
                if src.max_chars is not None and (size := pair.chars()) > src.max_chars:
                    report.drop("too_long", at, f"{size:,} characters, over max_chars {src.max_chars:,}")
                    continue
                row = pair.to_dict()
                rows.extend(row for _ in range(copies))
                entry["emitted_rows"] += copies
            for line in skipped or []:
                report.drop("malformed", line.split(": ", 1)[0], line.split(": ", 1)[-1])
            if entry["input_rows"] == 0:
                entry["skipped_reason"] = "empty"
    if not rows:
        raise MensError("the mix produced no rows", where,
                        "check the sources, weights and lane filters")
    if cfg.shuffle:
        rng.shuffle(rows)
    for entry in per_source:
        entry["share"] = round(entry["emitted_rows"] / len(rows), 6)
    report.counts["input_rows"] = sum(e["input_rows"] for e in per_source)
    report.counts["output_rows"] = len(rows)
    report.extra["sources"] = per_source
    report.extra["seed"] = cfg.seed
    return report.publish(rows, fingerprint_block(
        hashes, {"config": json.loads(json.dumps(cfg.__dict__, default=str)), "allow_missing": allow_missing,
                 "lenient": lenient}))


# ---------------------------------------------------------------- the stage: `mens corpus mix`, the pipeline's mix

def _check_section(ctx: Context, where: str) -> None:
    """The `mix` section (a mix.yaml minus `output`), checked by the mix's own parser when the
    config is read: a `wieght: 2` or a `weight: -1` found only by the mix stage costs the corpus
    stages before it. Paths are not looked up: the stages before the mix make them."""
    section = ctx.config.get("mix")
    if section is None:
        return
    if not isinstance(section, dict):
        raise MensError(f"mix must be a mapping, got {section!r}", where, "fix mix (see examples/pipeline.yaml)")
    if "output" in section:
        raise MensError("mix.output is set by the pipeline (WORK_DIR/data/train.jsonl)", where, "leave mix.output out")
    given = section.get("sources")
    if given is not None and not (isinstance(given, list) and all(
            isinstance(x, str) or (isinstance(x, dict) and "path" in x) for x in given)):
        raise MensError(f"mix.sources must be a list of paths or {{path, weight}} mappings, got {given!r}", where,
                        "fix mix.sources (see examples/pipeline.yaml)")
    sources = given or ["pairs.valid.jsonl"]  # the stage's defaults stand in when none
    parse_config({**section, "sources": sources, "output": "train.jsonl"}, Path("."), f"{where}: mix")


def _sources(ctx: Context) -> list[dict[str, Any]]:
    sources = ctx.section("mix").get("sources") or [{"path": "{work_dir}/corpus/pairs.valid.jsonl"},
                                                    {"path": "{work_dir}/corpus/synthetic.jsonl", "optional": True}]
    resolved = []
    for src in sources:
        src = {"path": src} if isinstance(src, str) else dict(src)
        resolved.append({**src, "path": str(ctx.path(src["path"]).resolve())})
    return resolved


def _params(ctx: Context) -> dict[str, Any]:
    return {**ctx.section("mix"), "sources": _sources(ctx), "seed": ctx.section("mix").get("seed", ctx.seed)}


def _run(ctx: Context) -> dict[str, Any]:
    # The `mix` section is a mix.yaml minus `output`: validated by the same parser, handed over
    # as a MixConfig. The mix report beside train.jsonl records the spec it was made from.
    where = "pipeline config: mix"
    spec = {**_params(ctx), "output": str(ctx.work_file("data", "train.jsonl").resolve())}
    rep = mix_pairs(parse_config(spec, ctx.work_file("data"), where), where=where)
    return {"rows": rep.counts["output_rows"]}


def _arguments(p) -> None:
    add_flag(p, "--config", type=Path, required=True, help="mix.yaml")
    add_flag(p, "-o", "--output", type=Path, help="override the config's output")
    p.add_argument("--allow-missing-sources", action="store_true",
                   help="skip missing sources (reported) instead of failing")
    p.add_argument("--lenient", action="store_true", help="skip malformed rows (counted) instead of failing")


def _command(args) -> int:
    from mens.corpus.cli import check_outputs

    cfg = load_config(args.config)
    out = args.output or cfg.output
    check_not_input(out, args.config)  # a source as the output is refused by mix() itself
    check_outputs((out, "-o" if args.output else "output"), report="mix")
    report = mix(args.config, allow_missing=args.allow_missing_sources, lenient=args.lenient,
                 output=args.output)
    say(report.summary())
    return 0


STAGE = Stage(
    "mix", inputs=lambda c: [Path(s["path"]) for s in _sources(c)], outputs=lambda c: [c.work_file("data", "train.jsonl")],
    run=_run, params=_params, code=CORPUS_CODE, section="mix", check=_check_section, help="weighted mix → train.jsonl",
    command=Command("mix", "weighted, seeded mix of pair files → train.jsonl", _arguments, _command, source="config",
                    description="Mix sources as mix.yaml says (weights, sample rates, lane filters, seed). Report: "
                    "<output stem>.mix_report.json."))
