"""BAAI bge-small-en-v1.5 as int8 ONNX (docs/architecture.md §2).

Model and tokenizer ship inside this package (``data/bge_small_en_v1_5_int8/``, MIT,
see ``data/NOTICE.md``), pinned by sha256 and checked at load; no download, no torch.
"""
from __future__ import annotations

from .onnx_encoder import DATA_DIR, OnnxEncoder

MODEL_DIR = DATA_DIR / "bge_small_en_v1_5_int8"
MODEL_SHA256 = "6c9c6101a956d62dfb5e7190c538226c0c5bb9cb27b651234b6df063ee7dbfe4"
TOKENIZER_SHA256 = "d241a60d5e8f04cc1b2b3e9ef7a4921b27bf526d9f6050ab90f9267a1f9e5c66"


class OnnxBgeSmall(OnnxEncoder):
    """384-d bge-small-en-v1.5: truncate at 512 tokens, CLS pooling, L2; no query prefix.

    The int8 graph quantizes activations dynamically over the whole batch, so a row
    would depend on its batch-mates (cosine >= .995); the default batch of one text
    makes every vector a function of its own text (a query and the same passage text
    embed identically; Dask workers and one process agree)."""

    base_name = "bge-small-en-v1.5-onnx-int8"
    dim = 384
    pooling = "cls"
    max_seq_length = 512
    default_batch_size = 1
    model_sha256 = MODEL_SHA256
    tokenizer_sha256 = TOKENIZER_SHA256

    def default_model_path(self):
        return MODEL_DIR / "model_quantized.onnx"

    def default_tokenizer_path(self):
        return MODEL_DIR / "tokenizer.json"
