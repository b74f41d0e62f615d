"""``[memory.embeddings]``: off by default, the key kept secret, blend arithmetic."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from core.memory.config import MemoryConfig
from core.memory.search import Candidate
from core.memory.semantic import blend


def test_defaults_and_secret() -> None:
    assert MemoryConfig().embeddings.enabled is False
    config = MemoryConfig.model_validate(
        {"embeddings": {"enabled": True, "api_key": "sk-hidden", "dimensions": 256}}
    )
    assert config.embeddings.api_key is not None
    assert "sk-hidden" not in repr(config)
    with pytest.raises(ValidationError):
        MemoryConfig.model_validate({"embeddings": {"weight": 1.5}})
    with pytest.raises(ValidationError):
        MemoryConfig.model_validate({"embeddings": {"unknown": 1}})


def _c(entry_id: int, relevance: float) -> Candidate:
    return Candidate(entry_id, "global", f"t{entry_id}", "[]", None, None, 0.0, 0.0, relevance)


def test_blend() -> None:
    text = [_c(1, 8.0), _c(2, 4.0)]
    near = [_c(2, 0.9), _c(3, 0.8), _c(4, -0.5)]
    scores = {c.id: round(c.relevance, 3) for c in blend(text, near, 0.5)}
    assert scores == {1: 0.5, 2: 0.7, 3: 0.4, 4: 0.0}
    assert {c.id: c.relevance for c in blend(text, [], 0.0)} == {1: 1.0, 2: 0.5}
