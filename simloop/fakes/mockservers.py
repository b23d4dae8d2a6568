"""The servers ``mock-llm --profile`` answers as: llama-cpp-python, llama-server (current and
mid-2025), vLLM, Ollama and OpenAI (see ``mockprofiles.py`` for what is reproduced and how
it was established), and the registry of profiles."""

from __future__ import annotations

import uuid
from typing import Any

from .mockprofiles import (
    Profile,
    Refused,
    first_choice_usage,
    format_of,
    inner_schema,
    positive_int,
    prompt_tokens,
    timings,
)
from .mockprofiles import llamacpp_error as _cpp
from .mockprofiles import openai_error as _oai

__all__ = ["PROFILES", "make_profile"]


class LlamaCppPython(Profile):
    """llama-cpp-python 0.3.36 (``python -m llama_cpp.server``)."""

    name = "llama-cpp-python"
    default_window = 2048  # its --n_ctx default
    cuts = True
    refuses_at_window = True

    def models(self) -> dict[str, Any]:
        return {"object": "list", "data": [{"id": self.model, "object": "model", "owned_by": "me", "permissions": []}]}

    def check(self, body: dict[str, Any]) -> Refused | None:
        kind = format_of(body).get("type") if "response_format" in body else "text"
        if kind not in ("text", "json_object"):
            detail = (f"1 validation error:\n  {{'type': 'literal_error', 'loc': ('body', 'response_format', 'type'), "
                      f"'msg': \"Input should be 'text' or 'json_object'\", 'input': {kind!r}, "
                      f"'ctx': {{'expected': \"'text' or 'json_object'\"}}}}")
            return Refused(500, _oai(detail, "internal_server_error"))
        return None

    def max_tokens(self, body: dict[str, Any]) -> int | None:
        return positive_int(body.get("max_tokens"))  # max_completion_tokens is no field of its: ignored

    def overflow(self, body: dict[str, Any], tokens: int, asked: int | None) -> Refused | tuple[list[Any], int]:
        total = tokens + asked if asked else tokens
        return Refused(400, _oai(f"This model's maximum context length is {self.window} tokens. However, you "
                                 f"requested {total} tokens ({tokens} in the messages, {asked} in the completion). "
                                 "Please reduce the length of the messages or completion.",
                                 param="messages", code="context_length_exceeded"))

    def choices(self, body: dict[str, Any]) -> int:
        return 1  # n is accepted and ignored

    def decorate(self, out: dict[str, Any], body: dict[str, Any]) -> None:
        out["id"] = "chatcmpl-" + str(uuid.UUID(int=int(out["id"].rsplit("-", 1)[-1], 16) << 64))
        out["model"] = body.get("model") or f"/models/{self.model}.gguf"


class LlamaServer(Profile):
    """llama.cpp ``llama-server`` (ggml-org/llama.cpp@0c1e57098), 4 slots."""

    name = "llama-server"
    default_window = 4096
    cuts = True
    refuses_at_window = True
    slots = 4
    fingerprint = "b1-0c1e570"

    def _meta(self) -> dict[str, Any]:
        return {"vocab_type": 1, "n_vocab": 49152, "n_ctx": self.window, "n_ctx_train": 8192, "n_embd": 576,
                "n_params": 134515008, "size": 91521024, "ftype": "Q4_1"}

    def models(self) -> dict[str, Any]:
        return {"models": [{"name": self.model, "model": self.model, "type": "model", "capabilities": ["completion"]}],
                "object": "list",
                "data": [{"id": self.model, "aliases": [self.model], "tags": [], "object": "model", "created": 0,
                          "owned_by": "llamacpp", "meta": self._meta()}]}

    def props(self) -> dict[str, Any] | None:
        return {"default_generation_settings": {"n_ctx": self.window, "params": {}}, "total_slots": self.slots,
                "model_alias": self.model, "build_info": self.fingerprint}

    def refusal(self, message: str) -> Refused:
        return Refused(400, _cpp(400, message, "invalid_request_error"))

    def check(self, body: dict[str, Any]) -> Refused | None:
        kind = format_of(body).get("type", "")
        if "response_format" in body and kind not in ("", "text", "json_object", "json_schema"):
            return self.refusal(f'response_format type must be one of "text" or "json_object", but got: {kind}')
        n = body.get("n", 1)
        if n is not None and n != 1:
            return self.check_n(int(n))
        return None

    def check_n(self, n: int) -> Refused | None:
        if not 1 <= n <= self.slots:
            return self.refusal(f"Field 'n': Value must be between 1 <= value <= {self.slots}, but got {n}")
        return None

    def max_tokens(self, body: dict[str, Any]) -> int | None:
        return positive_int(body.get("max_tokens")) or positive_int(body.get("max_completion_tokens"))

    def overflow(self, body: dict[str, Any], tokens: int, asked: int | None) -> Refused | tuple[list[Any], int]:
        message = (f"request ({tokens} tokens) exceeds the available context size ({self.window} tokens), "
                   "try increasing it")
        return Refused(400, _cpp(400, message, "exceed_context_size_error", n_prompt_tokens=tokens,
                                 n_ctx=self.window))

    def choices(self, body: dict[str, Any]) -> int:
        return int(body.get("n") or 1)

    def decorate(self, out: dict[str, Any], body: dict[str, Any]) -> None:
        out["model"] = self.model  # the request's name is ignored
        out["system_fingerprint"] = self.fingerprint
        first = first_choice_usage(out)  # usage is that of the first choice only
        out["usage"] = {**first, "prompt_tokens_details": {"cached_tokens": 0}}
        out["timings"] = timings(first)


class LlamaServerLegacy(LlamaServer):
    """llama-server as built mid-2025 (@4227c9be): every refusal a 500, no ``n``, context shift."""

    name = "llama-server-legacy"
    fingerprint = "b1-4227c9b"
    slots = 1

    def _meta(self) -> dict[str, Any]:
        return {k: v for k, v in super()._meta().items() if k not in ("n_ctx", "ftype")}

    def refusal(self, message: str) -> Refused:
        return Refused(500, _cpp(500, message, "server_error"))

    def check_n(self, n: int) -> Refused | None:
        return self.refusal("Only one completion choice is allowed")

    def max_tokens(self, body: dict[str, Any]) -> int | None:
        return positive_int(body.get("max_tokens"))

    def overflow(self, body: dict[str, Any], tokens: int, asked: int | None) -> Refused | tuple[list[Any], int]:
        # Context shift: the prompt is cut to fit, silently (200, smaller usage.prompt_tokens).
        return body["messages"], max(1, (self.window or 4) * 3 // 4)

    def decorate(self, out: dict[str, Any], body: dict[str, Any]) -> None:
        out["model"] = body.get("model") or self.model
        out["system_fingerprint"] = self.fingerprint
        out["timings"] = timings(out["usage"])


class VLLM(Profile):
    """vLLM 0.33's OpenAI-compatible server (``vllm serve``)."""

    name = "vllm"
    default_window = 8192
    cuts = True
    object_schema = False  # json_object takes no schema: any JSON

    def models(self) -> dict[str, Any]:
        return {"object": "list", "data": [{
            "id": self.model, "object": "model", "created": 0, "owned_by": "vllm", "root": f"/models/{self.model}",
            "parent": None, "max_model_len": self.window,
            "permission": [{"id": "modelperm-mock", "object": "model_permission", "allow_sampling": True}]}]}

    def check(self, body: dict[str, Any]) -> Refused | None:
        if body.get("model") not in (None, self.model):
            return Refused(404, _oai(f"The model `{body['model']}` does not exist. Valid aliases: {self.model}.",
                                     "NotFoundError", "model", 404))
        fmt = format_of(body)
        kind = fmt.get("type")
        if "response_format" in body and kind not in ("text", "json_object", "json_schema", "structural_tag"):
            return Refused(400, _oai(f"1 validation error:\n  {{'type': 'literal_error', 'loc': ('body', "
                                     f"'response_format', 'type'), 'msg': \"Input should be 'text', 'json_object', "
                                     f"'json_schema' or 'structural_tag'\", 'input': {kind!r}}}", "Bad Request",
                                     "body.response_format.type", 400))
        if kind == "json_schema" and not isinstance(fmt.get("json_schema"), dict):
            message = ("When response_format type is 'json_schema', the 'json_schema' field must be provided. "
                       "(parameter=response_format)")
            return Refused(400, _oai(message, "BadRequestError", "response_format", 400))
        if kind == "json_schema" and not fmt["json_schema"].get("name"):
            return Refused(400, _oai("1 validation error:\n  {'type': 'missing', 'loc': ('body', 'response_format', "
                                     "'json_schema', 'name'), 'msg': 'Field required'}", "Bad Request",
                                     "body.response_format.json_schema.name", 400))
        n, temperature = int(body.get("n") or 1), body.get("temperature")
        if n > 1 and isinstance(temperature, (int, float)) and temperature < 1e-5:
            return Refused(400, _oai(f"n must be 1 when using greedy sampling, got {n}.", "BadRequestError", None, 400))
        return None

    def overflow(self, body: dict[str, Any], tokens: int, asked: int | None) -> Refused | tuple[list[Any], int]:
        return Refused(400, _oai(
            f"This model's maximum context length is {self.window} tokens. However, your prompt contains {tokens} "
            "input tokens, which exceeds this limit even without any output tokens. Please reduce the length of the "
            f"input prompt. (parameter=input_tokens, value={tokens})", "BadRequestError", "input_tokens", 400))

    def decorate(self, out: dict[str, Any], body: dict[str, Any]) -> None:
        out["model"] = body.get("model") or self.model
        out["system_fingerprint"] = None
        for choice in out["choices"]:
            choice["stop_reason"] = None


class Ollama(Profile):
    """Ollama's ``/v1`` OpenAI compatibility layer."""

    name = "ollama"
    default_window = 4096
    cuts = True
    object_schema = False  # json_object -> format "json": any JSON

    def models(self) -> dict[str, Any]:
        return {"object": "list", "data": [{"id": self.model, "object": "model", "created": 0, "owned_by": "library"}]}

    def check(self, body: dict[str, Any]) -> Refused | None:
        if not body["messages"]:
            return Refused(400, _oai("[] is too short - 'messages'"))
        if body.get("model") not in (None, self.model):
            return Refused(404, _oai(f"model '{body['model']}' not found", "api_error"))
        return None

    def max_tokens(self, body: dict[str, Any]) -> int | None:
        return positive_int(body.get("max_tokens"))

    def overflow(self, body: dict[str, Any], tokens: int, asked: int | None) -> Refused | tuple[list[Any], int]:
        # Never an error: the oldest messages but the system ones and the last are dropped
        # until the prompt fits, and what still does not fit is cut (200).
        messages = list(body["messages"])
        while prompt_tokens(messages) > (self.window or 0):
            drop = next((i for i, m in enumerate(messages[:-1]) if isinstance(m, dict) and m.get("role") != "system"),
                        None)
            if drop is None:  # the runner cuts the rest of the prompt, leaving room to answer
                return messages, max(1, (self.window or 4) * 3 // 4)
            del messages[drop]
        return messages, prompt_tokens(messages)

    def choices(self, body: dict[str, Any]) -> int:
        return 1  # n is no field of its: ignored

    def format(self, body: dict[str, Any], messages: list[Any]) -> tuple[bool, dict[str, Any] | None]:
        fmt = format_of(body)
        kind = str(fmt.get("type") or "").strip().lower()
        if kind == "json_schema":  # json_schema.schema only; without one, no constraint at all
            schema = inner_schema(fmt)
            return schema is not None, schema
        return kind == "json_object", None  # anything else: unconstrained, never an error

    def decorate(self, out: dict[str, Any], body: dict[str, Any]) -> None:
        out["id"] = f"chatcmpl-{int(out['id'].rsplit('-', 1)[-1], 16) % 999}"
        out["model"] = body.get("model") or self.model
        out["system_fingerprint"] = "fp_ollama"


# What OpenAI's chat endpoint takes (openai 2.x CompletionCreateParams): anything else is refused.
_OPENAI_KEYS = frozenset(
    "messages model audio frequency_penalty function_call functions logit_bias logprobs max_completion_tokens "
    "max_tokens metadata modalities n parallel_tool_calls prediction presence_penalty prompt_cache_key "
    "reasoning_effort response_format safety_identifier seed service_tier stop store stream stream_options "
    "temperature tool_choice tools top_logprobs top_p user verbosity web_search_options".split())


class OpenAI(Profile):
    """The OpenAI API (chat completions)."""

    name = "openai"
    default_window = 128_000
    cuts = True

    def models(self) -> dict[str, Any]:
        return {"object": "list", "data": [{"id": self.model, "object": "model", "created": 0, "owned_by": "system"}]}

    def check(self, body: dict[str, Any]) -> Refused | None:
        unknown = sorted(set(body) - _OPENAI_KEYS)
        if unknown:
            return Refused(400, _oai(f"Unrecognized request argument supplied: {unknown[0]}"))
        if body.get("model") != self.model:
            return Refused(404, _oai(f"The model `{body.get('model')}` does not exist or you do not have access to it.",
                                     code="model_not_found"))
        fmt = format_of(body)
        if fmt.get("type") == "json_schema" and not (fmt.get("json_schema") or {}).get("name"):
            return Refused(400, _oai("Missing required parameter: 'response_format.json_schema.name'.",
                                     param="response_format.json_schema.name", code="missing_required_parameter"))
        if fmt.get("type") == "json_object" and "schema" in fmt:  # unverified: how OpenAI words this one
            return Refused(400, _oai("Unrecognized request argument supplied: response_format.schema"))
        return None

    def decorate(self, out: dict[str, Any], body: dict[str, Any]) -> None:
        out["system_fingerprint"] = "fp_mock"


PROFILES: dict[str, type[Profile]] = {p.name: p for p in (
    Profile, LlamaCppPython, LlamaServer, LlamaServerLegacy, VLLM, Ollama, OpenAI)}


def make_profile(name: str, model: str, window: int | None = None, refuse: tuple[str, ...] = (),
                 no_json: bool = False) -> Profile:
    """The profile ``name`` serving ``model`` with context ``window`` (None: its default)."""
    return PROFILES[name](model, window, refuse, no_json)
