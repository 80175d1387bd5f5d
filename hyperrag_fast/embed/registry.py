"""Embedders by name, for a CLI that must choose one (no config dicts, DESIGN §2)."""
from __future__ import annotations

from typing import Callable

from .base import Embedder


def available_embedders() -> dict[str, Callable[[], Embedder]]:
    """``{embedder name: zero-argument constructor}``; constructing may raise ImportError
    naming the extra to install. Imports happen only when a constructor is called."""

    def onnx() -> Embedder:
        from .onnx_minilm import OnnxMiniLM
        return OnnxMiniLM()

    def torch() -> Embedder:
        from .torch_minilm import TorchMiniLM
        return TorchMiniLM()

    def hashing() -> Embedder:
        from .hashing import HashingEmbedder
        return HashingEmbedder()

    return {
        "all-MiniLM-L6-v2-onnx-int8": onnx,
        "all-MiniLM-L6-v2-torch": torch,
        "hashing-v1:dim=64:seed=0": hashing,
    }
