"""The training-pair contract (DESIGN.md §3) and row reading: JSONL, Parquet and Hub datasets
read with numbered errors (the row formats users bring are turned into the contract by
`mens.formats`; atomic writes are `mens.files`)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from mens.errors import MensError, user_error
from mens.formats import FileFormat, check_tool_calls, row_format, to_pair_dict

SCHEMA_VERSION = "mens.pair.v1"
LANES = ("codegen", "docs_qa", "tooling", "error_correction", "followup")
RESPONSE_MODES = ("code_only", "prose_only", "mixed")

# Contract fields; everything else in a row is kept verbatim in `Pair.extra`.
_KNOWN = (
    "prompt", "instruction", "response", "output", "messages", "system", "category", "rating",
    "difficulty", "lane", "response_mode", "lang", "source", "schema_version", "metadata", "text", "tools",
    "input",
)


@dataclass
class Pair:
    """One training example: a prompt/response pair, a multi-turn `messages` list (with `tools`
for tool use), or a plain `text` trained on every token."""

    prompt: str = ""
    response: str = ""
    messages: list[dict[str, Any]] | None = None
    text: str | None = None
    tools: list[dict[str, Any]] | None = None
    system: str | None = None
    category: str | None = None
    rating: int | None = None
    difficulty: int | None = None
    lane: str | None = None
    response_mode: str | None = None
    lang: str | None = None
    source: str | None = None
    schema_version: str = SCHEMA_VERSION
    metadata: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)

    def chars(self) -> int:
        """How long the example is in characters: its prompt and response, turns or text."""
        turns = sum(len(str(m.get("content") or "")) for m in self.messages or [])
        return len(self.prompt) + len(self.response) + turns + len(self.text or "") + len(self.system or "")

    @classmethod
    def from_dict(cls, obj: Any, where: str = "pair") -> "Pair":
        """Validate one JSON object against the contract; errors name `where` (file:line)."""
        if not isinstance(obj, dict):
            raise MensError(f"expected a JSON object, got {type(obj).__name__}", where,
                            "write one JSON object per line")
        fmt = row_format(obj)
        if fmt not in (None, "pair", "messages", "text"):
            obj = to_pair_dict(obj, fmt, where)  # TRL, ShareGPT, Alpaca, tool_trace → the contract
        prompt = obj.get("prompt", obj.get("instruction"))
        if "prompt" not in obj and isinstance(prompt, str) and isinstance(obj.get("input"), str) \
                and obj["input"].strip():
            prompt = f"{prompt}\n{obj['input']}"  # Alpaca's input is part of the user turn
        response = obj.get("response", obj.get("output"))
        messages = obj.get("messages")
        text = obj.get("text") if fmt == "text" or ("text" in obj and prompt is None and messages is None) else None
        tools = obj.get("tools")
        if tools is not None and (not isinstance(tools, list) or not all(isinstance(t, dict) for t in tools)):
            raise MensError("field 'tools' must be a list of tool schemas (objects)", where,
                            "give tools as [{type: function, function: {name, parameters}}, …]")
        if text is not None:
            if not isinstance(text, str) or not text.strip():
                raise MensError("field 'text' must be a non-empty string", where, "fix or drop the row")
            prompt, response = "", text
        elif messages is not None:
            _check_messages(messages, where)
            if prompt is None:
                prompt = next((m["content"] for m in messages if m["role"] == "user"), "")
            if response is None:
                response = messages[-1]["content"]
        else:
            for key, value, alias in (("prompt", prompt, "instruction"), ("response", response, "output")):
                if not isinstance(value, str) or not value.strip():
                    raise MensError(f"field '{key}' (or '{alias}') must be a non-empty string", where,
                                    "give prompt and response, or a messages list")
        pair = cls(prompt=prompt or "", response=response or "", messages=messages, text=text, tools=tools)
        for key in ("system", "category", "lane", "response_mode", "lang", "source", "schema_version"):
            value = obj.get(key)
            if value is not None and not isinstance(value, str):
                raise MensError(f"field '{key}' must be a string", where, "fix or drop the field")
            if value is not None:
                setattr(pair, key, value)
        for key, low, high in (("rating", 1, 5), ("difficulty", 1, 10)):
            value = obj.get(key)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)) or int(value) != value \
                    or not low <= value <= high:
                raise MensError(f"field '{key}' must be an integer {low}-{high}, got {value!r}", where,
                                "fix or drop the field")
            setattr(pair, key, int(value))
        meta = obj.get("metadata")
        if meta is not None and not isinstance(meta, dict):
            raise MensError("field 'metadata' must be an object", where, "fix or drop the field")
        pair.metadata = meta or {}
        pair.extra = {k: v for k, v in obj.items() if k not in _KNOWN}
        return pair

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.text is not None:
            out["text"] = self.text
        elif self.messages is not None:
            out["messages"] = self.messages
        else:
            out["prompt"] = self.prompt
            out["response"] = self.response
        if self.tools is not None:
            out["tools"] = self.tools
        for key in ("system", "category", "rating", "difficulty", "lane", "response_mode", "lang", "source"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        out["schema_version"] = self.schema_version
        if self.metadata:
            out["metadata"] = self.metadata
        out.update(self.extra)
        return out

    def chat(self, default_system: str | None = None) -> list[dict[str, str]]:
        """The conversation as role/content messages (last turn is the assistant's); a text row
        is one assistant message holding the text."""
        if self.text is not None:
            return [{"role": "assistant", "content": self.text}]
        if self.messages is not None:
            msgs = list(self.messages)
        else:
            msgs = [{"role": "user", "content": self.prompt}, {"role": "assistant", "content": self.response}]
        system = self.system or default_system
        if system and msgs[0]["role"] != "system":
            msgs.insert(0, {"role": "system", "content": system})
        return msgs


def _check_messages(messages: Any, where: str) -> None:
    todo = "give messages as [{role, content}, …] ending with an assistant turn"
    if not isinstance(messages, list) or not messages:
        raise MensError("field 'messages' must be a non-empty list", where, todo)
    for i, m in enumerate(messages):
        if isinstance(m, dict) and m.get("content") is None and m.get("tool_calls"):
            m["content"] = ""  # an assistant turn that only calls tools (OpenAI's null content)
        if not isinstance(m, dict) or not isinstance(m.get("role"), str) or not isinstance(m.get("content"), str):
            raise MensError(f"messages[{i}] needs string 'role' and 'content'", where, todo)
        check_tool_calls(m, i, where, todo)
        if m["role"] not in ("system", "user", "assistant", "tool"):
            raise MensError(f"messages[{i}] has unknown role {m['role']!r}", where, todo)
    if messages[-1]["role"] != "assistant":
        raise MensError("the last message must be the assistant's", where, todo)


# ---------------------------------------------------------------- JSONL reading

_SURROGATE = re.compile(r"\\u[dD][89a-fA-F]")


def iter_jsonl(path: str | Path, skipped: list[str] | None = None, *,
               has_lenient: bool = True) -> Iterator[tuple[int, Any]]:
    """Yield (line number, parsed object) for each non-blank line. A bad line raises a MensError
    naming file:line, or, when a `skipped` list is given, is recorded there and passed over. The
    error's advice names `--lenient` only where the command has it (`has_lenient`)."""
    skip = " or pass --lenient to skip it" if has_lenient else ""
    path = Path(path)
    if path.is_dir():
        raise MensError("is a folder, not a JSONL file", str(path), "give the file itself")
    if not path.is_file():
        raise MensError("file not found", str(path), "check the path")
    try:
        fh = path.open("rb")
    except OSError as err:
        raise user_error(err, str(path)) from None
    with fh:
        for lineno, raw in enumerate(fh, 1):
            try:
                # A BOM starts the files some Windows editors and tools write: not part of the data.
                line = raw.decode("utf-8-sig" if lineno == 1 else "utf-8")
                if not line.strip():
                    continue
                obj = json.loads(line)
                if _SURROGATE.search(line):  # a `\ud800` escape alone is JSON, but no text: it cannot be written
                    json.dumps(obj, ensure_ascii=False).encode("utf-8")
            except UnicodeEncodeError as err:
                exc = MensError(f"a lone surrogate escape ({err.object[err.start]!r}) is not text",
                                f"{path}:{lineno}", "fix the line" + skip)
            except UnicodeDecodeError as err:
                exc = MensError(f"line is not UTF-8 text (byte {err.start})", f"{path}:{lineno}",
                                "re-encode the file as UTF-8")
            except json.JSONDecodeError as err:
                exc = MensError(f"malformed JSON: {err.msg} at column {err.colno}", f"{path}:{lineno}",
                                "fix the line" + skip)
            except RecursionError:  # `[` × 100,000: the decoder gives up, the line is not data
                exc = MensError("JSON nested too deeply", f"{path}:{lineno}",
                                "flatten the line" + skip)
            else:
                yield lineno, obj
                continue
            if skipped is None:
                raise exc
            skipped.append(f"{exc.where}: {exc.what}")


HUB_PREFIX = "hf:"


def iter_rows(source: str | Path, skipped: list[str] | None = None) -> Iterator[tuple[str, Any]]:
    """Yield (where, row) for each row of a `.jsonl` file (where = file:line), a `.parquet` file
    (file:row) or a Hub dataset `hf:ORG/NAME[:SPLIT]` (read with `datasets`; online only)."""
    text = str(source)
    if text.startswith(HUB_PREFIX):
        yield from _hub_rows(text)
    elif text.endswith(".parquet"):
        yield from _parquet_rows(Path(text))
    else:
        for lineno, obj in iter_jsonl(source, skipped):
            yield f"{source}:{lineno}", obj


def _parquet_rows(path: Path) -> Iterator[tuple[str, Any]]:
    import pyarrow.parquet as pq

    if not path.is_file():
        raise MensError("file not found", str(path), "check the path")
    try:
        table = pq.read_table(path)
    except Exception as err:  # pyarrow's ArrowInvalid and kin: not a Parquet file
        raise MensError(f"not a readable Parquet file: {' '.join(str(err).split())[:200]}", str(path),
                        "write it with pandas/pyarrow/datasets, or give a .jsonl file") from None
    for i, row in enumerate(table.to_pylist(), 1):
        yield f"{path}:{i}", row


def hub_dataset(source: str):
    """The `datasets.Dataset` a `hf:ORG/NAME[:SPLIT]` source names (split defaults to train)."""
    import os

    name, _, split = source[len(HUB_PREFIX):].partition(":")
    if not name:
        raise MensError("no dataset id after hf:", source, "write hf:ORG/NAME or hf:ORG/NAME:SPLIT")
    if os.environ.get("HF_HUB_OFFLINE", "0") not in ("0", "", "false") or \
            os.environ.get("HF_DATASETS_OFFLINE", "0") not in ("0", "", "false"):
        raise MensError(f"cannot fetch Hub dataset {name}: offline (HF_HUB_OFFLINE / HF_DATASETS_OFFLINE is set)",
                        source, "run online, or save the dataset as .jsonl/.parquet and give that file")
    try:
        import datasets
    except ImportError:
        raise MensError("reading a Hub dataset needs the datasets package", source,
                        "pip install datasets, or give a .jsonl/.parquet file") from None
    try:
        return datasets.load_dataset(name, split=split or "train")
    except Exception as err:  # no network, no such dataset, no such split: one line, not a traceback
        raise MensError(f"cannot load Hub dataset {name}: {' '.join(str(err).split())[:200]}", source,
                        "check the id and split and that the Hub is reachable, or give a local file") from None


def _hub_rows(source: str) -> Iterator[tuple[str, Any]]:
    for i, row in enumerate(hub_dataset(source), 1):
        yield f"{source}:{i}", row


def iter_pairs(source: str | Path, record_format: str = "auto",
               skipped: list[str] | None = None) -> Iterator[tuple[str, Pair]]:
    """Yield (where, pair) for each row of `source`, its rows held to one format (`record_format`,
    or the first row's; `mens.formats`). A bad row raises a one-line MensError naming file:line,
    or, when a `skipped` list is given, is recorded there (`file:line: why`) and passed over."""
    fmt = FileFormat(str(source), record_format)
    for where, obj in iter_rows(source, skipped):
        try:
            fmt.check(obj, where)
            yield where, Pair.from_dict(obj, where)
        except MensError as exc:
            if skipped is None:
                raise
            skipped.append(f"{exc.where}: {exc.what}")


def read_pairs(path: str | Path, lenient: bool = False, record_format: str = "auto") -> tuple[list[Pair], list[str]]:
    """Read a pairs file (.jsonl, .parquet or hf:ORG/NAME, in any format `mens.formats` knows).
    Strict: the first bad line raises. Lenient: bad lines are skipped and their reasons
    (`file:line: why`) returned alongside the good pairs."""
    skipped: list[str] | None = [] if lenient else None
    pairs = [pair for _, pair in iter_pairs(path, record_format, skipped)]
    return pairs, skipped or []
