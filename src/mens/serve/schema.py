"""What a request may say: the OpenAI request bodies as pydantic models, every field typed and
range-checked, and the one error type the API answers with.

A body that is not JSON (bad syntax, nesting deeper than pydantic's JSON parser allows, a lone
surrogate escape) or that breaks a constraint below is a 400 naming the field, before any work
is done. As OpenAI does, types are strict (`"max_tokens": "5"` or `"n": 2.0` is a 400, not
coerced). A field mens does not know is ignored, as vLLM's and llama.cpp's servers do: clients
written for local servers send their sampling extensions (`top_k`, `min_p`, `repetition_penalty`)
to every OpenAI-compatible endpoint, and a 400 would make mens unusable from them. Fields OpenAI defines that mens does not act on (penalties, logit_bias, user, store,
metadata …) are still type- and range-checked (logit_bias keys must be token ids), so a wrong
value is reported rather than silently ignored; asking for what mens does not do (logprobs,
non-text content parts or output, JSON response formats, legacy `functions`) is refused. Chat
requests may carry `tools`, `tool_choice` and the tool messages of OpenAI's function calling
(serve/tools.py turns them into the template's inputs).
"""

from __future__ import annotations

import json
import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

INT64 = 2**63
MAX_CHOICES = 128      # prompts × n of one request (OpenAI's own bound on n)
MAX_STOPS = 16         # stop strings per request
MAX_STOP_CHARS = 256   # characters per stop string
MAX_TOOLS = 128        # tools per request (OpenAI's bound)
TOOL_NAME = r"^[A-Za-z0-9_-]{1,64}$"   # a function name, as OpenAI allows
UNSUPPORTED_CHAT = ("audio", "prediction", "functions", "function_call", "reasoning_effort", "verbosity",
                    "web_search_options", "moderation")

# Fields with a default that OpenAI's spec makes nullable: `null` is the default. Clients
# generated from the spec, and the `openai` client given an explicit None, send `null` for what
# the caller left unset.
NULL_IS_DEFAULT = ("temperature", "top_p", "n", "stream", "echo", "grammar")

Float = Annotated[float, Field(allow_inf_nan=False)]
Stop = Annotated[str, Field(max_length=MAX_STOP_CHARS)]


class APIError(Exception):
    """An answer in OpenAI's error shape, `{"error": {"message", "type", "param", "code"}}`."""

    def __init__(self, status: int, message: str, type: str = "invalid_request_error",
                 param: str | None = None, code: str | None = None):
        super().__init__(message)
        self.status, self.body = status, {"error": {"message": message, "type": type, "param": param, "code": code}}


class _StreamOptions(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)
    include_usage: bool | None = None
    include_obfuscation: bool | None = None   # accepted, not acted on (chunks are not padded)


class _Params(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)   # unknown fields: see the module doc
    model: str
    max_tokens: int | None = Field(default=None, ge=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)
    temperature: Float = Field(default=1.0, ge=0.0, le=2.0)
    top_p: Float = Field(default=1.0, gt=0.0, le=1.0)
    n: int = Field(default=1, ge=1, le=16)
    stop: Stop | Annotated[list[Stop], Field(max_length=MAX_STOPS)] | None = None
    seed: int | None = Field(default=None, ge=-INT64, lt=INT64)
    stream: bool = False
    stream_options: _StreamOptions | None = None
    # accepted and range-checked, not acted on
    presence_penalty: Float | None = Field(default=None, ge=-2.0, le=2.0)
    frequency_penalty: Float | None = Field(default=None, ge=-2.0, le=2.0)
    logit_bias: dict[str, Annotated[Float, Field(ge=-100, le=100)]] | None = None
    user: str | None = Field(default=None, max_length=256)
    # mens extension (send with the openai client's `extra_body`), used only under --grammar:
    # auto = fence mode for chat, whole mode for a completion whose prompt is viable code
    grammar: Literal["auto", "fence", "whole", "off"] = "auto"

    @model_validator(mode="before")
    @classmethod
    def _null_is_default(cls, data: Any) -> Any:
        """Drop the NULL_IS_DEFAULT fields sent as null, so they take their defaults (a required
        field sent as null is still refused)."""
        if isinstance(data, dict):
            return {k: v for k, v in data.items() if not (v is None and k in NULL_IS_DEFAULT)}
        return data

    def check(self) -> None:
        """Checks across fields, after pydantic's per-field ones (→ APIError 400)."""
        if self.stream_options is not None and not self.stream:
            raise APIError(400, "The 'stream_options' parameter is only allowed when 'stream' is enabled.",
                           param="stream_options")
        for key in self.logit_bias or {}:   # the vocabulary's size is checked by the app
            if not (key.isascii() and key.isdigit()):
                raise APIError(400, f"Invalid key in 'logit_bias': {key!r} is not a token id.", param="logit_bias")

    def stops(self) -> tuple[str, ...]:
        stops = (self.stop,) if isinstance(self.stop, str) else (self.stop or ())
        return tuple(s for s in stops if s)


class _Part(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)
    type: str
    text: str | None = None


class _Function(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)
    name: str = Field(pattern=TOOL_NAME)
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None


class _Tool(BaseModel):
    """One entry of `tools`: {type: "function", function: {name, description, parameters}}."""
    model_config = ConfigDict(extra="ignore", strict=True)
    type: Literal["function"]
    function: _Function


class _Called(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)
    name: str = Field(min_length=1, max_length=256)
    arguments: str | dict[str, Any] = "{}"   # OpenAI sends a JSON string


class _ToolCall(BaseModel):
    """A call in an earlier assistant message, sent back with the conversation."""
    model_config = ConfigDict(extra="ignore", strict=True)
    id: str = Field(max_length=256)
    type: Literal["function"] = "function"
    function: _Called


class _Name(BaseModel):
    model_config = ConfigDict(strict=True)
    name: str


class _NamedChoice(BaseModel):
    """tool_choice naming one function: {type: "function", function: {name}}."""
    model_config = ConfigDict(strict=True)
    type: Literal["function"]
    function: _Name


class _Message(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)
    role: Literal["system", "user", "assistant", "tool", "developer"]
    content: str | list[_Part] | None = None   # required but for an assistant's (check())
    name: str | None = Field(default=None, max_length=256)
    tool_calls: list[_ToolCall] | None = None        # assistant
    tool_call_id: str | None = Field(default=None, max_length=256)  # tool: the call it answers

    def text(self) -> str:
        """The content as text: a string, or OpenAI's list of parts (text parts joined)."""
        if self.content is None or isinstance(self.content, str):
            return self.content or ""
        return "".join(p.text or "" for p in self.content if p.type == "text")


class ChatParams(_Params):
    messages: list[_Message] = Field(min_length=1)
    logprobs: bool | None = None
    top_logprobs: int | None = Field(default=None, ge=0, le=20)
    tools: list[_Tool] | None = Field(default=None, max_length=MAX_TOOLS)
    tool_choice: Literal["none", "auto", "required"] | _NamedChoice | None = None
    parallel_tool_calls: bool | None = None   # accepted, not acted on
    # OpenAI fields that change nothing on a local server: type-checked, then ignored
    store: bool | None = None
    metadata: dict[str, str] | None = None
    service_tier: str | None = None
    prompt_cache_key: str | None = None
    prompt_cache_retention: str | None = None
    prompt_cache_options: dict[str, Any] | None = None
    safety_identifier: str | None = None
    # OpenAI fields asking for what mens does not do: a 400 (check()) unless they ask for plain text
    response_format: dict[str, Any] | None = None
    modalities: list[str] | None = None
    audio: Any = None
    prediction: Any = None
    functions: Any = None
    function_call: Any = None
    reasoning_effort: Any = None
    verbosity: Any = None
    web_search_options: Any = None
    moderation: Any = None

    def check(self) -> None:
        super().check()
        unsupported = [f for f in UNSUPPORTED_CHAT if getattr(self, f) is not None]
        if unsupported:
            hint = " (use 'tools' and 'tool_choice')" if unsupported[0] in ("functions", "function_call") else ""
            raise APIError(400, f"'{unsupported[0]}' is not supported by mens serve{hint}.", param=unsupported[0])
        if self.response_format is not None and self.response_format.get("type") != "text":
            raise APIError(400, "Only response_format {'type': 'text'} is supported by mens serve (no JSON mode "
                           "or JSON schema).", param="response_format")
        if self.modalities is not None and self.modalities != ["text"]:
            raise APIError(400, "Only the 'text' modality is supported by mens serve.", param="modalities")
        if self.logprobs or self.top_logprobs:
            raise APIError(400, "logprobs are not supported by mens serve; leave 'logprobs' unset.",
                           param="logprobs")
        names = [t.function.name for t in self.tools or ()]
        if self.tool_choice not in (None, "none", "auto") and not names:
            raise APIError(400, "'tool_choice' asks for a tool call but no 'tools' are given.", param="tool_choice")
        if isinstance(self.tool_choice, _NamedChoice) and self.tool_choice.function.name not in names:
            raise APIError(400, f"tool_choice names the function {self.tool_choice.function.name!r}, which is not "
                           "in 'tools'.", param="tool_choice")
        for i, m in enumerate(self.messages):
            if m.content is None and m.role != "assistant":
                raise APIError(400, f"Missing required parameter: 'messages[{i}].content'.", param="messages")
            if m.content == []:  # as OpenAI: a list of parts holds at least one
                raise APIError(400, f"Invalid 'messages[{i}].content': empty array. Expected an array with minimum "
                               "length 1.", param="messages")
            for j, part in enumerate(m.content if isinstance(m.content, list) else ()):
                if part.type != "text":
                    raise APIError(400, f"messages[{i}].content[{j}] is a content part of type {part.type!r}; this "
                                   "model reads text only (parts of type 'text').", param="messages")
                if part.text is None:
                    raise APIError(400, f"Missing required parameter: 'messages[{i}].content[{j}].text'.",
                                   param="messages")
            if m.tool_calls and m.role != "assistant":
                raise APIError(400, f"messages[{i}]: only assistant messages carry 'tool_calls'.", param="messages")
            if m.role == "tool" and not m.tool_call_id:
                raise APIError(400, f"messages[{i}]: a message with role 'tool' needs the 'tool_call_id' it "
                               "answers.", param="messages")
            for j, c in enumerate(m.tool_calls or ()):
                if isinstance(c.function.arguments, str):
                    try:
                        json.loads(c.function.arguments)
                    except ValueError:
                        raise APIError(400, f"messages[{i}].tool_calls[{j}].function.arguments is not valid JSON.",
                                       param="messages") from None


TokenId = Annotated[int, Field(ge=0, lt=INT64, strict=True)]  # strict: `true` is not token 1


class CompletionParams(_Params):
    # OpenAI's four forms: a text, texts, one prompt as token ids, prompts as token ids (what
    # lm-evaluation-harness's local-completions sends by default).
    prompt: str | list[str] | list[TokenId] | list[list[TokenId]]
    echo: bool = False
    logprobs: int | None = Field(default=None, ge=0, le=5)
    best_of: int | None = Field(default=None, ge=1, le=20)
    suffix: str | None = None

    def check(self) -> None:
        super().check()
        if self.logprobs is not None:   # 0 too: the sampled tokens' logprobs
            raise APIError(400, "logprobs are not supported by mens serve; leave 'logprobs' unset.",
                           param="logprobs")
        if self.best_of is not None and self.best_of != self.n:
            raise APIError(400, "best_of other than n is not supported by mens serve.", param="best_of")
        if self.suffix:
            raise APIError(400, "suffix (insertion) is not supported by mens serve.", param="suffix")
        prompts = self.prompts()
        if not prompts:
            raise APIError(400, "'prompt' must not be empty.", param="prompt")
        if len(prompts) * self.n > MAX_CHOICES:
            raise APIError(400, f"{len(prompts)} prompts × n={self.n} is {len(prompts) * self.n} choices; "
                           f"at most {MAX_CHOICES} per request.", param="prompt")

    def prompts(self) -> list[str | list[int]]:
        """One entry per prompt: its text, or its token ids."""
        if isinstance(self.prompt, str) or (self.prompt and isinstance(self.prompt[0], int)):
            return [self.prompt]
        return self.prompt


def parse_body(raw: bytes, schema: type[_Params]) -> _Params:
    """Validate a request body straight from its bytes (pydantic's JSON parser bounds nesting and
    rejects lone surrogates) → the params, or a 400 naming the first bad field."""
    try:
        params = schema.model_validate_json(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        if err["type"] == "json_invalid":
            raise APIError(400, f"The request body is not valid JSON: {err['msg'].removeprefix('Invalid JSON: ')}.") \
                from None
        if err["type"] == "model_type" and not err["loc"]:
            raise APIError(400, "The request body must be a JSON object.") from None
        err = _deepest(exc.errors())
        msg = "Input should be an object" if err["type"] == "model_type" else err["msg"]  # not the class's name
        raise APIError(400, f"Invalid value for '{_where(err['loc'])}': {msg}.",
                       param=str(err["loc"][0]) if err["loc"] else None) from None
    params.check()
    return params


# The names pydantic gives the branches of a union in an error's loc (`str`, `list[_Part]`,
# `constrained-str`, `literal['none','auto']`, `_NamedChoice`): not fields of the request.
_FIELD = re.compile(r"[a-z][a-z0-9_]*")
_TYPE_TAGS = {"str", "int", "float", "bool", "dict", "list", "none"}


def _path(loc: tuple) -> tuple:
    """An error's loc without the union branch names in it."""
    return tuple(p for p in loc if isinstance(p, int) or p.isdigit()            # a logit_bias key
                 or (_FIELD.fullmatch(p) and p not in _TYPE_TAGS))


def _deepest(errors: list[dict]) -> dict:
    """The error to report: the first one, or, where the first field is a union every branch of
    which failed (one error each), the branch that got furthest into the value — a list of content
    parts whose `text` is not a string is reported there, not as "content should be a string"."""
    first = _path(errors[0]["loc"])
    same = [e for e in errors if _path(e["loc"])[:len(first)] == first]
    return max(same, key=lambda e: len(_path(e["loc"])))   # max keeps the first of equals


def _where(loc: tuple) -> str:
    """A loc as OpenAI writes a field: `messages[0].content[1].text`."""
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in _path(loc)).lstrip(".")
