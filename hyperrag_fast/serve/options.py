"""Request bodies (pydantic, for validation and the OpenAPI schema) and their
:class:`~hyperrag_fast.config.QueryOptions`: a preset, then the request's changes, checked
by the options' own validation in ``config`` (docs/architecture.md §6, §11)."""
from __future__ import annotations

import dataclasses
import math
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ..config import PAPER, TUNED, HybridOptions, QueryOptions, StitchOptions, preset_for
from ..methods import METHODS

PRESETS = {"tuned": TUNED, "paper": PAPER}


def preset(name: str, embedder_name: str | None) -> QueryOptions:
    """``tuned``: the preset of the index's embedder (``config.preset_for``, as the CLI);
    ``paper``: ``config.PAPER``."""
    return preset_for(embedder_name) if name == "tuned" else PRESETS[name]


class QueryRequest(BaseModel):
    """One question (``query``: a string) or a batch (a list, embedded in one call)."""

    model_config = ConfigDict(extra="forbid")
    query: str | list[str] = Field(description="a question, or a list of questions")
    method: str | None = Field(None, description="a registered method (default: the preset's)")
    top_k: int | None = Field(None, ge=1, le=1000, description="chunks returned per question")
    k_nodes: int | None = Field(None, ge=0, description="K_V: candidate entity states")
    k_chunks: int | None = Field(None, ge=0, description="K_C: candidate chunks")
    preset: Literal["tuned", "paper"] | None = Field(None, description="base options "
                                                      "(default: the server's)")
    stitch: dict[str, Any] = Field(default_factory=dict, description="StitchOptions changes")
    hybrid: dict[str, Any] = Field(default_factory=dict, description="HybridOptions changes")
    include_text: bool = Field(True, description="return each chunk's text")


class AskRequest(BaseModel):
    """A question answered by the configured LLM from the retrieved passages."""

    model_config = ConfigDict(extra="forbid")
    question: str
    method: str | None = None
    top_k: int | None = Field(None, ge=1, le=100)
    max_context_chars: int = Field(12_000, ge=100, le=200_000)
    temperature: float = Field(0.0, ge=0.0, le=2.0)


def _changed(dc, changes: dict[str, Any], where: str):
    """``dataclasses.replace`` with each value checked against the field's default type
    (JSON has no tuples or infinities: lists become tuples, null means infinity where
    the default is a float)."""
    fields = {f.name: f for f in dataclasses.fields(dc)}
    out = {}
    for k, v in changes.items():
        if k not in fields:
            raise ValueError(f"unknown {where} option {k!r}; known: {sorted(fields)}")
        cur = getattr(dc, k)
        if isinstance(cur, bool):
            ok = isinstance(v, bool)
        elif isinstance(cur, int):
            ok = isinstance(v, int) and not isinstance(v, bool)
        elif isinstance(cur, float):
            v = math.inf if v is None else v
            ok = isinstance(v, (int, float)) and not isinstance(v, bool)
            v = float(v) if ok else v
        elif isinstance(cur, tuple):
            ok = isinstance(v, list) and all(isinstance(x, str) for x in v)
            v = tuple(v) if ok else v
        else:
            ok = isinstance(v, type(cur))
        if not ok:
            raise ValueError(f"{where}.{k} must be of type {type(cur).__name__}, got {v!r}")
        out[k] = v
    return dataclasses.replace(dc, **out) if out else dc


def query_options(base: QueryOptions, method: str | None = None, top_k: int | None = None,
                  k_nodes: int | None = None, k_chunks: int | None = None,
                  stitch: dict[str, Any] | None = None,
                  hybrid: dict[str, Any] | None = None) -> QueryOptions:
    """``base`` with one request's changes; ValueError (-> 400) names what is wrong."""
    o = base
    if method is not None and method not in METHODS:
        raise ValueError(f"unknown method {method!r}; registered: {sorted(METHODS)}")
    s: StitchOptions = _changed(o.stitch, stitch or {}, "stitch")
    h: HybridOptions = _changed(o.hybrid, hybrid or {}, "hybrid")
    changes = {k: v for k, v in (("method", method), ("k_nodes", k_nodes),
                                 ("k_chunks", k_chunks)) if v is not None}
    o = dataclasses.replace(o, stitch=s, hybrid=h, **changes)
    return o if top_k is None else o.with_top_k(top_k)


def questions(query: str | list[str], max_batch: int) -> list[str]:
    """The request's questions; ValueError for an empty one or an oversized batch."""
    qs = [query] if isinstance(query, str) else list(query)
    if not qs:
        raise ValueError("empty batch: give at least one question")
    if len(qs) > max_batch:
        raise ValueError(f"batch of {len(qs)} questions; this server takes at most {max_batch}")
    for i, q in enumerate(qs):
        if not q.strip():
            raise ValueError("empty query: every question must be a non-blank string"
                             + (f" (item {i})" if len(qs) > 1 else ""))
    return qs
