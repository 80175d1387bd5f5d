"""The one embedder factory: by kind (CLI ``--embedder``, eval, benchmarks) or by the name an
index recorded in its manifest. Imports happen only when an embedder is made; making one
may raise ImportError naming the extra to install (docs/architecture.md §2)."""
from __future__ import annotations

from typing import Callable

from .base import Embedder

#: ``--embedder`` kinds: the int8 ONNX MiniLM, int8 ONNX bge-small, MiniLM's torch
#: reference, the test hash
KINDS = ("minilm", "bge-small", "torch", "hashing")
#: kinds a user picks for an index (``hyperrag index --embedder``)
INDEX_KINDS = ("minilm", "bge-small", "hashing")
_ONNX_NAMES = {"all-MiniLM-L6-v2-onnx-int8": "minilm", "bge-small-en-v1.5-onnx-int8": "bge-small"}


def make_embedder(kind: str = "minilm", **kw) -> Embedder:
    """A new embedder of ``kind`` (keyword arguments go to its constructor)."""
    if kind == "minilm":
        from .onnx_minilm import OnnxMiniLM
        return OnnxMiniLM(**kw)
    if kind == "bge-small":
        from .onnx_bge import OnnxBgeSmall
        return OnnxBgeSmall(**kw)
    if kind == "torch":
        from .torch_minilm import TorchMiniLM
        return TorchMiniLM(**kw)
    if kind == "hashing":
        from .hashing import HashingEmbedder
        return HashingEmbedder(**kw)
    raise ValueError(f"embedder kind must be one of {KINDS}, got {kind!r}")


def embedder_for_name(name: str, intra_op_threads: int | None = None) -> Embedder:
    """The embedder that produces vectors under ``name`` (an index manifest's
    ``embedder.name``); ValueError when no factory makes it. ``intra_op_threads`` sets
    an ONNX embedder's pool (vectors do not depend on it) and is ignored by the others."""
    base, _, rest = name.partition(":")
    if base in _ONNX_NAMES:
        kw = dict(p.split("=", 1) for p in rest.split(":")) if rest else {}
        if set(kw) - {"max_length"}:
            raise ValueError(f"no embedder factory makes {name!r}")
        return make_embedder(_ONNX_NAMES[base], intra_op_threads=intra_op_threads,
                             **{k: int(v) for k, v in kw.items()})
    if name.startswith("all-MiniLM-L6-v2-torch"):
        return make_embedder("torch")
    if name.startswith("hashing-v1:"):
        parts = dict(p.split("=", 1) for p in name.split(":")[1:])
        return make_embedder("hashing", dim=int(parts["dim"]), seed=int(parts["seed"]))
    raise ValueError(f"no embedder factory makes {name!r}; construct it with the Python API")


def available_embedders() -> dict[str, Callable[[], Embedder]]:
    """``{embedder name: zero-argument constructor}`` of the default configurations."""
    return {
        "all-MiniLM-L6-v2-onnx-int8": lambda: make_embedder("minilm"),
        "bge-small-en-v1.5-onnx-int8": lambda: make_embedder("bge-small"),
        "all-MiniLM-L6-v2-torch": lambda: make_embedder("torch"),
        "hashing-v1:dim=64:seed=0": lambda: make_embedder("hashing"),
    }
