"""The OpenAPI 3.1 document of the webhook API, generated from its pydantic models."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from channels.webhook.auth import SIGNATURE_HEADER, TIMESTAMP_HEADER
from channels.webhook.models import (
    Accepted,
    CallbackBody,
    ErrorBody,
    MessageStatusBody,
    ReplyBody,
    TimeoutBody,
    WebhookRequest,
)

__all__ = ["openapi_document"]

_MODELS: tuple[type[BaseModel], ...] = (
    WebhookRequest,
    Accepted,
    ReplyBody,
    TimeoutBody,
    MessageStatusBody,
    CallbackBody,
    ErrorBody,
)


def _ref(model: type[BaseModel]) -> dict[str, Any]:
    return {"$ref": f"#/components/schemas/{model.__name__}"}


def _json(model: type[BaseModel], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": _ref(model)}}}


def _errors(*statuses: int) -> dict[str, Any]:
    text = {
        400: "Bad JSON or schema (the error names the field)",
        401: "Bad, missing or expired signature or token",
        404: "Unknown hook or message",
        405: "Wrong method",
        413: "Body larger than the hook's max_body",
        429: "Rate limited: retry after the Retry-After header's seconds",
    }
    return {str(s): _json(ErrorBody, text[s]) for s in statuses}


def openapi_document(version: str = "1") -> dict[str, Any]:
    """The document served at ``GET /webhook/openapi.json``."""
    _, defs = models_json_schema(
        [(m, "validation" if m is WebhookRequest else "serialization") for m in _MODELS],
        ref_template="#/components/schemas/{model}",
    )
    hook = {"name": "name", "in": "path", "required": True, "schema": {"type": "string"}}
    post = {
        "summary": "Send a message to the assistant",
        "operationId": "sendMessage",
        "parameters": [hook],
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": _ref(WebhookRequest)}},
        },
        "responses": {
            "202": _json(Accepted, "Stored; poll or wait for the reply"),
            "200": _json(ReplyBody, 'The reply ("wait": true)'),
            "504": _json(TimeoutBody, 'No reply within wait_timeout ("wait": true)'),
            **_errors(400, 401, 404, 405, 413, 429),
        },
        "callbacks": {
            "reply": {
                "{$request.body#/callback_url}": {
                    "post": {
                        "summary": "The final reply, signed with the hook's secret",
                        "requestBody": {
                            "content": {"application/json": {"schema": _ref(CallbackBody)}}
                        },
                        "responses": {"2XX": {"description": "Received (else retried)"}},
                    }
                }
            }
        },
    }
    get = {
        "summary": "A message's status and reply",
        "operationId": "getMessage",
        "parameters": [
            hook,
            {"name": "id", "in": "path", "required": True, "schema": {"type": "string"}},
        ],
        "responses": {
            "200": _json(MessageStatusBody, "Status; reply once done"),
            **_errors(401, 404, 405),
        },
    }
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "familiar webhooks",
            "version": version,
            "description": (
                f"Authenticate with a bearer token or sign: {SIGNATURE_HEADER}: sha256=<hex "
                f'HMAC-SHA256 of "{{timestamp}}.{{body}}">, {TIMESTAMP_HEADER}: Unix seconds '
                "(within 300 s). A GET signs the empty body."
            ),
        },
        "paths": {"/webhook/{name}": {"post": post}, "/webhook/{name}/messages/{id}": {"get": get}},
        "components": {
            "schemas": defs["$defs"],
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer"},
                "signature": {"type": "apiKey", "in": "header", "name": SIGNATURE_HEADER},
            },
        },
        "security": [{"bearer": []}, {"signature": []}],
    }
