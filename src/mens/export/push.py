"""`mens push RUN_OR_MERGED --repo USER/NAME`: the files a loader needs and a model card with the
Hub's metadata header, uploaded with huggingface_hub (token: HF_TOKEN, or `hf auth login`).

What goes up, and nothing else:
- an adapter run: adapter_config.json (its `base_model_name_or_path` set to the upstream Hub id,
  never a local path), the adapter weights, the tokenizer files, README.md;
- a full/scratch run or a merged model: config.json, generation_config.json, the safetensors
  shards (and their index), the tokenizer files, README.md.
Checkpoints, telemetry, manifests and reports stay home; their figures are in the card, which
names the base by its Hub id and shows any other local path as `…/<last part>`.
`--dry-run DIR` writes exactly those files to DIR and uploads nothing. An upload error is one line.
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from pathlib import Path

from mens.errors import MensError
from mens.hf import ADAPTER_CONFIG, is_adapter_run, read_manifest

ADAPTER_FILES = (ADAPTER_CONFIG, "adapter_model.safetensors")
MODEL_FILES = ("config.json", "generation_config.json", "model.safetensors", "model.safetensors.index.json")
SHARD = re.compile(r"model-\d+-of-\d+\.safetensors")
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja",
                   "chat_template.json", "vocab.json", "merges.txt", "tokenizer.model", "added_tokens.json")


def _is_local(name: str) -> bool:
    return name.startswith((".", "/", "~")) or Path(name).exists() or name.count("/") != 1


def upstream_id(source: Path, given: str | None) -> str | None:
    """The base model's Hub id: --upstream-model-id, else the manifest's provenance, else its
    base id when that is a Hub id rather than a local path; None when unknown."""
    if given:
        return given
    manifest = read_manifest(source)
    prov = manifest.get("provenance") if isinstance(manifest.get("provenance"), dict) else {}
    base = manifest.get("base_model") if isinstance(manifest.get("base_model"), dict) else {}
    for candidate in (prov.get("upstream_model_id"), base.get("id")):
        if candidate and not _is_local(str(candidate)):
            return str(candidate)
    if is_adapter_run(source):
        named = json.loads((source / ADAPTER_CONFIG).read_text()).get("base_model_name_or_path")
        if named and not _is_local(str(named)):
            return str(named)
    return None


def files_to_upload(source: Path) -> list[str]:
    """The names in `source` a loader needs (README.md, written here, is added by `stage`)."""
    names = {p.name for p in source.iterdir() if p.is_file()}
    wanted = ADAPTER_FILES if is_adapter_run(source) else MODEL_FILES
    picked = [n for n in wanted if n in names]
    if not is_adapter_run(source):
        picked += sorted(n for n in names if SHARD.fullmatch(n))
    return picked + [n for n in TOKENIZER_FILES if n in names]


def check_push_args(source: Path, repo: str, upstream: str | None, dry_run: Path | None) -> None:
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    from mens.hf import check_files

    if source.is_file():
        raise MensError("is a file, not a run or model directory", str(source),
                        "give a mens run dir or a merged model dir")
    if not source.is_dir():
        raise MensError("run or model directory not found", str(source), "give a mens run dir or a merged model dir")
    if not (source / "config.json").is_file() and not is_adapter_run(source):
        raise MensError(f"not a run or model directory (no {ADAPTER_CONFIG} or config.json)", str(source),
                        "give the --output-dir of mens train, or a merged model dir")
    try:
        validate_repo_id(repo)
    except HFValidationError:
        raise MensError(f"bad --repo {repo!r}", "--repo", "write USER/NAME (letters, digits, - _ .)") from None
    if repo.count("/") != 1:
        raise MensError(f"bad --repo {repo!r}: no owner", "--repo", "write USER/NAME")
    check_files(source)
    weights = [n for n in files_to_upload(source) if n.endswith(".safetensors")]
    if not weights:
        raise MensError("no safetensors weights to upload", str(source),
                        "push a run mens train finished, or a merged model dir")
    if is_adapter_run(source) and upstream is None:
        raise MensError("the adapter's base is a local path, not a Hub id", str(source / ADAPTER_CONFIG),
                        "pass --upstream-model-id ORG/NAME (the Hub id of the base model)")
    if upstream is not None and _is_local(upstream):
        raise MensError(f"--upstream-model-id {upstream!r} is not a Hub id", "--upstream-model-id",
                        "write ORG/NAME as on huggingface.co")
    if dry_run is not None:
        from mens.train.preflight import check_writable_dir

        if dry_run == Path("."):  # also `--dry-run ""`
            raise MensError("--dry-run needs a new folder to write the files to", "--dry-run",
                            "give a new folder, e.g. --dry-run staged")
        if dry_run.exists() and not dry_run.is_dir():
            raise MensError("--dry-run is a file, not a folder", str(dry_run), "give a new folder")
        if dry_run.is_dir() and any(dry_run.iterdir()):
            raise MensError("--dry-run folder exists and is not empty", str(dry_run), "give a new folder")
        check_writable_dir(dry_run, "--dry-run")


CARD_INPUTS = ("training_manifest.json", "eval_results.json", "benchmark_results.json", "gate_receipt.json")
# An absolute or ~ path inside a string (not the tail of a URL, a Hub id or a ratio like 1/2).
LOCAL_PATH = re.compile(r"(?<![\w.:/~-])(?:~|/)[^\s\"'`|,;()\[\]{}<>]*")


def without_local_paths(value, base: dict[str, str]):
    """`value` (JSON) with this machine's paths taken out: a string naming the local base model
    becomes `base[that string]` (its Hub id), any other path `…/<its last part>`."""
    if isinstance(value, dict):
        return {k: without_local_paths(v, base) for k, v in value.items()}
    if isinstance(value, list):
        return [without_local_paths(v, base) for v in value]
    if isinstance(value, str):
        if value in base:
            return base[value]
        return LOCAL_PATH.sub(lambda m: "…/" + (Path(m.group(0)).name or "…"), value)
    return value


def card_sources(source: Path, dest: Path, upstream: str | None) -> Path:
    """A copy of the files the card is read from, under `dest/<source's name>`, with no local
    path in them (the run's manifest records where the base, data and run dir were)."""
    from mens.evaluate.card import read_json

    manifest = read_manifest(source)
    named = manifest.get("base_model") if isinstance(manifest.get("base_model"), dict) else {}
    base = {str(v): upstream for k, v in named.items() if k in ("id", "path") and v and upstream
            and _is_local(str(v))}
    out = dest / source.name
    out.mkdir(parents=True)
    for name in CARD_INPUTS:
        data = read_json(source / name)
        if data is not None:
            (out / name).write_text(json.dumps(without_local_paths(data, base)), encoding="utf-8")
    return out


def stage(source: Path, dest: Path, upstream: str | None) -> list[str]:
    """Write into `dest` exactly what would be uploaded; returns the file names."""
    from mens.evaluate.card import hub_metadata, render_card

    adapter = is_adapter_run(source)
    names = files_to_upload(source)
    for name in names:
        shutil.copy2(source / name, dest / name)
    if adapter:
        cfg = json.loads((source / ADAPTER_CONFIG).read_text())
        cfg["base_model_name_or_path"] = upstream
        (dest / ADAPTER_CONFIG).write_text(json.dumps(cfg, indent=2) + "\n")
    uploaded = sorted([*names, "README.md"])
    with tempfile.TemporaryDirectory(prefix="mens-card-") as tmp:
        run = card_sources(source, Path(tmp), upstream)
        card = hub_metadata(run, adapter=adapter, base_model=upstream) + "\n" + render_card(run, files=uploaded)
    (dest / "README.md").write_text(card, encoding="utf-8")
    return uploaded


def _first_line(err: BaseException) -> str:
    """One line for an upload error: its own first line, plus what the server said (an HTTP
    error), or its cause's line (huggingface_hub wraps an LFS failure as "Error while uploading
    'x' to the Hub.")."""
    def first(text: str) -> str:
        return (text.strip().splitlines() or [""])[0]

    text = first(str(err)) or type(err).__name__
    server = first(str(getattr(err, "server_message", None) or ""))
    if server and server not in text:
        text += f": {server}"
    elif err.__cause__ is not None and not isinstance(err, OSError) and first(str(err.__cause__)) not in text:
        text += f": {_first_line(err.__cause__)}"
    return text[:200]


def push(source: str | Path, repo: str, *, private: bool = False, upstream_model_id: str | None = None,
         dry_run: str | Path | None = None) -> str:
    from mens.files import atomic_path

    source = Path(source)
    dry = None if dry_run is None else Path(dry_run)  # `--dry-run ""` is a mistake, never an upload
    check_push_args(source, repo, upstream_model_id, dry)
    upstream = upstream_id(source, upstream_model_id)
    check_push_args(source, repo, upstream, dry)
    if dry is not None:
        if dry.is_dir():
            dry.rmdir()
        with atomic_path(dry) as tmp:
            tmp.mkdir()
            names = stage(source, tmp, upstream)
        return f"dry run: {len(names)} files for {repo} in {dry}: {', '.join(names)}"

    from huggingface_hub import HfApi, get_token
    from huggingface_hub.utils import are_progress_bars_disabled, disable_progress_bars, enable_progress_bars

    from mens.progress import quiet

    if not get_token():
        raise MensError("no Hugging Face token", "HF_TOKEN", "set HF_TOKEN or run `hf auth login`")
    api = HfApi()
    bars_were_off = are_progress_bars_disabled()
    if quiet():  # mens's rule: no bar when --quiet or stderr is not a terminal
        disable_progress_bars()
    with tempfile.TemporaryDirectory(prefix="mens-push-") as tmp:
        names = stage(source, Path(tmp), upstream)
        try:
            url = api.create_repo(repo, private=private, exist_ok=True, repo_type="model")
            api.upload_folder(repo_id=repo, folder_path=tmp, repo_type="model",
                              commit_message=f"mens push {source.name}")
        except Exception as err:  # the network edge: HTTP errors, refused connections, bad replies
            raise MensError(f"upload failed: {_first_line(err)}", repo,
                            "check the token's write permission, the repo name and your network") from err
        finally:
            if not bars_were_off:
                enable_progress_bars()
    return f"pushed {len(names)} files to {url}"
