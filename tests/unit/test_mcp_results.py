"""What the model sees of an MCP tool result: text, described binaries, JSON, capped."""

from __future__ import annotations

import base64

import mcp_types as t

from core.mcp.tools import render_result


def result(
    *blocks: t.ContentBlock, structured: dict[str, object] | None = None
) -> t.CallToolResult:
    return t.CallToolResult(content=list(blocks), structured_content=structured)


def test_text_images_audio_and_resources() -> None:
    png = base64.b64encode(b"\x89PNG" + b"\0" * 2044).decode()
    text = render_result(
        result(
            t.TextContent(text="hello"),
            t.ImageContent(data=png, mime_type="image/png"),
            t.AudioContent(data="not base64!", mime_type="audio/wav"),
            t.ResourceLink(name="readme", uri="file:///r.md", description="the readme"),
            t.EmbeddedResource(resource=t.TextResourceContents(uri="file:///a.txt", text="inside")),
            t.EmbeddedResource(
                resource=t.BlobResourceContents(uri="file:///b.bin", blob=png, mime_type=None)
            ),
        ),
        limit=10_000,
    )
    assert text.splitlines() == [
        "hello",
        "[image: image/png, 2048 bytes]",
        "[audio: audio/wav, ? bytes]",
        "[resource link: readme <file:///r.md> — the readme]",
        "[resource <file:///a.txt>]",
        "inside",
        "[resource <file:///b.bin>: binary]",
    ]


def test_structured_content_when_there_is_no_text() -> None:
    assert render_result(result(structured={"n": 5}), limit=100) == '{"n": 5}'
    assert render_result(result(t.TextContent(text="5"), structured={"n": 5}), limit=100) == "5"


def test_long_results_keep_head_and_tail() -> None:
    text = render_result(result(t.TextContent(text="a" * 500 + "b" * 500)), limit=200)
    assert text.startswith("a" * 100) and text.endswith("b" * 100)
    assert "[... 800 chars truncated ...]" in text
