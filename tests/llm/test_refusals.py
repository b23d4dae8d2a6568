"""Which error answers are refusals (llm/retry.py): the real servers' bodies, as they send them.

Bodies marked observed were answered by the servers themselves (llama-cpp-python 0.3.36,
llama.cpp's llama-server @0c1e57098 and @4227c9be); the others are from the servers' source
or public reports (vLLM 0.33 and older, Ollama, OpenAI).
"""

from __future__ import annotations

import httpx2
import pytest

from simloop.llm.http import status_error
from simloop.llm.retry import classify, refusal_of, retryable

REQUEST = httpx2.Request("POST", "http://127.0.0.1:9/v1/chat/completions")


def answer(status: int, body: dict | str) -> httpx2.Response:
    """The error answer as the chat client receives it."""
    if isinstance(body, dict):
        return httpx2.Response(status, json=body, request=REQUEST)
    return httpx2.Response(status, text=body, request=REQUEST)

CPP_JSON_SCHEMA = {"error": {"message": "1 validation error:\n  {'type': 'literal_error', 'loc': ('body', "
                             "'response_format', 'type'), 'msg': \"Input should be 'text' or 'json_object'\", 'input': "
                             "'json_schema', 'ctx': {'expected': \"'text' or 'json_object'\"}}\n\n  "
                             "File \"/x/app.py\", line 376, in create_chat_completion\n    POST /v1/chat/completions",
                             "type": "internal_server_error", "param": None, "code": None}}  # observed


@pytest.mark.parametrize("status, body, param", [
    (500, CPP_JSON_SCHEMA, "response_format"),
    (400, {"error": {"code": 400, "message": 'response_format type must be one of "text" or "json_object", but got: '
                     "sound", "type": "invalid_request_error"}}, "response_format"),  # observed, llama-server
    (500, {"error": {"code": 500, "message": "Only one completion choice is allowed", "type": "server_error"}},
     "n"),  # observed, llama-server mid-2025
    (400, {"error": {"code": 400, "message": "Field 'n': Value must be between 1 <= value <= 4, but got 5",
                     "type": "invalid_request_error"}}, "n"),  # observed, llama-server
    (400, {"error": {"message": "n must be 1 when using greedy sampling, got 2.", "type": "BadRequestError",
                     "param": None, "code": 400}}, "n"),  # vLLM
    (400, {"error": {"message": "Unrecognized request argument supplied: seed", "type": "invalid_request_error",
                     "param": None, "code": None}}, "seed"),  # OpenAI's wording
    (400, {"error": {"message": "Unrecognized request argument supplied: response_format",
                     "type": "invalid_request_error", "param": None, "code": None}}, "response_format"),
    (400, {"error": {"message": "Missing required parameter: 'response_format.json_schema.name'.",
                     "type": "invalid_request_error", "param": "response_format.json_schema.name",
                     "code": "missing_required_parameter"}}, "response_format"),  # OpenAI
    (500, {"error": {"code": 500, "message": "top_logprobs requires logprobs to be set to true, not supported",
                     "type": "server_error"}}, "logprobs"),
])
def test_a_refused_parameter_is_named_and_never_retried(status, body, param):
    refusal = classify(status, body["error"])  # what status_error keeps as the body: the error object
    assert refusal is not None and (refusal.kind, refusal.param) == ("param", param)
    exc = status_error(answer(status, body))
    assert refusal_of(exc) == refusal and not retryable(exc)


@pytest.mark.parametrize("status, body, prompt, window", [
    (400, {"error": {"message": "This model's maximum context length is 256 tokens. However, you requested 423 "
                     "tokens (413 in the messages, 10 in the completion). Please reduce the length of the messages "
                     "or completion.", "type": "invalid_request_error", "param": "messages",
                     "code": "context_length_exceeded"}}, 413, 256),  # observed, llama-cpp-python
    (400, {"error": {"message": "This model's maximum context length is 256 tokens. However, you requested 413 "
                     "tokens (413 in the messages, None in the completion). Please reduce the length of the messages "
                     "or completion.", "type": "invalid_request_error", "param": "messages",
                     "code": "context_length_exceeded"}}, 413, 256),  # observed, no max_tokens
    (400, {"error": {"code": 400, "message": "request (614 tokens) exceeds the available context size (512 tokens), "
                     "try increasing it", "type": "exceed_context_size_error", "n_prompt_tokens": 614,
                     "n_ctx": 512}}, 614, 512),  # observed, llama-server
    (400, {"error": {"code": 400, "message": "the request exceeds the available context size, try increasing it",
                     "type": "exceed_context_size_error", "n_prompt_tokens": 3153, "n_ctx": 2048}}, 3153, 2048),
    (400, {"error": {"code": 400, "message": "the request exceeds the available context size. try increasing the "
                     "context size or enable context shift", "type": "invalid_request_error"}}, None, None),
    (400, {"error": {"message": "This model's maximum context length is 8192 tokens. However, your prompt contains "
                     "9000 input tokens, which exceeds this limit even without any output tokens. Please reduce the "
                     "length of the input prompt. (parameter=input_tokens, value=9000)", "type": "BadRequestError",
                     "param": "input_tokens", "code": 400}}, 9000, 8192),  # vLLM 0.33
    (400, {"object": "error", "message": "This model's maximum context length is 8192 tokens. However, you requested "
           "9064 tokens (9000 in the messages, 64 in the completion). Please reduce the length of the messages or "
           "completion.", "type": "BadRequestError", "param": None, "code": 400}, 9000, 8192),  # vLLM <= 0.10, flat
    (400, {"error": {"message": "This model's maximum context length is 8192 tokens. However, your messages resulted "
                     "in 8227 tokens. Please reduce the length of the messages.", "type": "invalid_request_error",
                     "param": "messages", "code": "context_length_exceeded"}}, 8227, 8192),  # OpenAI
])
def test_a_context_overflow_is_recognised_with_its_numbers(status, body, prompt, window):
    refusal = classify(status, body.get("error", body))
    assert refusal is not None and refusal.kind == "context"
    assert (refusal.prompt_tokens, refusal.window) == (prompt, window)
    assert not retryable(status_error(answer(status, body)))


@pytest.mark.parametrize("status, body", [
    (404, {"error": {"message": "The model `x` does not exist. Valid aliases: served.", "type": "NotFoundError",
                     "param": "model", "code": 404}}),  # vLLM
    (404, {"object": "error", "message": "The model `x` does not exist.", "type": "NotFoundError", "param": None,
           "code": 404}),  # vLLM, flat
    (404, {"error": {"message": "model 'x' not found", "type": "api_error", "param": None, "code": None}}),  # Ollama
    (404, {"error": {"message": "The model `x` does not exist or you do not have access to it.",
                     "type": "invalid_request_error", "param": None, "code": "model_not_found"}}),  # OpenAI
    (400, {"error": {"code": 400, "message": "model 'x' not found", "type": "invalid_request_error"}}),  # router
])
def test_an_unknown_model_is_recognised(status, body):
    refusal = classify(status, body.get("error", body))
    assert refusal is not None and refusal.kind == "model"


@pytest.mark.parametrize("status, body", [
    (500, {"error": {"message": "injected server error", "type": "server_error", "code": None}}),
    (503, "Service Unavailable"),
    (429, {"error": {"message": "Rate limit reached: too many tokens per min", "type": "rate_limit_exceeded"}}),
    (502, "<html><body>Bad gateway</body></html>"),
])
def test_transient_failures_are_no_refusals(status, body):
    assert classify(status, body.get("error", body) if isinstance(body, dict) else body) is None
    assert retryable(status_error(answer(status, body)))
