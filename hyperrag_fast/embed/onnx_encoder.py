"""Transformer sentence encoders as int8 ONNX on onnxruntime: the offline embedders
(README, "Why these offline dependencies"; docs/architecture.md §2).

One session runner serves every model; a subclass names the model files (pinned by
sha256, checked at load), the pooling and the truncation. Nothing touches the network:
onnxruntime's built-in telemetry (which resolves a Microsoft events host from a thread
of a long-lived session) is switched off by :func:`import_onnxruntime` (README,
"Reliability").
"""
from __future__ import annotations

import hashlib
import importlib.util
import logging
import os
import sys
from pathlib import Path
from typing import Sequence

import numpy as np

from ..checksums import file_digest
from .base import l2_normalize
from .onnx_cache import optimised_model
from .wordpiece import QueryTokenizer

DATA_DIR = Path(__file__).resolve().parent.parent / "data"
INSTALL_HINT = 'install the offline extra: pip install "hyperrag_fast[offline]"'
TELEMETRY_ENV = "ORT_DISABLE_TELEMETRY"  # read once, when onnxruntime's library loads
log = logging.getLogger(__name__)


def import_onnxruntime():
    """``onnxruntime`` with its telemetry off: ``ORT_DISABLE_TELEMETRY=1`` is set before
    the first import (``onnxruntime.disable_telemetry_events()`` does not stop the DNS
    queries of 1.32; a value the user set is kept). If onnxruntime was imported before,
    without the variable, the setting comes too late: a warning says so."""
    if "onnxruntime" in sys.modules and os.environ.get(TELEMETRY_ENV) is None:
        log.warning("onnxruntime was imported before hyperrag_fast could set %s=1: its "
                    "telemetry may query the network; set the variable before importing "
                    "onnxruntime", TELEMETRY_ENV)
    os.environ.setdefault(TELEMETRY_ENV, "1")
    import onnxruntime
    return onnxruntime


def verify_sha256(path: str | os.PathLike, expected: str) -> None:
    """Raise ValueError unless the file's sha256 is ``expected`` (pin what you load)."""
    _check_pin(path, file_digest(path, "sha256"), expected)


def _check_pin(path, got: str, expected: str) -> None:
    if got != expected:
        raise ValueError(f"checksum mismatch for {path}: sha256 {got}, pinned "
                         f"{expected}; the model file changed, refusing to load it")


def pinned_bytes(path: str | os.PathLike, expected: str) -> bytes:
    """The bytes of a file, read once; ValueError (as :func:`verify_sha256`) unless their
    sha256 is ``expected``."""
    with open(path, "rb") as f:
        raw = f.read()
    _check_pin(path, hashlib.sha256(raw).hexdigest(), expected)
    return raw


def default_threads() -> int:
    """Cores available to this process."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


class OnnxEncoder:
    """L2-normalised sentence embeddings: WordPiece (truncated) -> ONNX -> pooling -> L2.

    Subclasses set ``base_name``, ``dim``, ``pooling`` ("mean": masked mean of the last
    hidden state; "cls": its first row), ``max_seq_length``, the pinned checksums and
    ``default_model_path`` / ``default_tokenizer_path``.

    Texts are sorted by token length so each batch pads little, and a batch holds at most
    ``batch_size`` texts and ``batch_tokens`` padded tokens (peak memory follows
    batch x width^2 in attention). ``intra_op_threads`` defaults to all available cores.
    ``arena`` keeps onnxruntime's CPU memory arena, which grows with every new input shape
    and never shrinks (off by default). ``model_cache`` (default on) runs the saved
    pre-optimised copy of the model (``embed/onnx_cache.py``: the same output, a fraction
    of the start-up CPU and memory); off, the model is optimised in memory. ``model_path`` / ``tokenizer_path`` exist for
    tests; any file is checked against the pinned sha256. Instances pickle as their
    settings (Dask workers rebuild the session).
    """

    base_name = ""
    dim = 0
    pooling = "mean"
    max_seq_length = 256
    default_batch_size = 64
    model_sha256 = ""
    tokenizer_sha256 = ""

    def default_model_path(self) -> str | os.PathLike:
        raise NotImplementedError

    def default_tokenizer_path(self) -> str | os.PathLike:
        raise NotImplementedError

    def __init__(self, intra_op_threads: int | None = None, batch_size: int | None = None,
                 max_length: int | None = None, model_path: str | os.PathLike | None = None,
                 tokenizer_path: str | os.PathLike | None = None, batch_tokens: int = 1024,
                 arena: bool = False, model_cache: bool = True) -> None:
        self._args = dict(intra_op_threads=intra_op_threads, batch_size=batch_size,
                          max_length=max_length, model_path=model_path,
                          tokenizer_path=tokenizer_path, batch_tokens=batch_tokens, arena=arena,
                          model_cache=model_cache)
        try:
            ort = import_onnxruntime()
            if importlib.util.find_spec("tokenizers") is None:  # imported on first need
                raise ImportError("No module named 'tokenizers'")
        except ImportError as e:
            raise ImportError(f"{type(self).__name__} needs onnxruntime and tokenizers ({e}); "
                              f"{INSTALL_HINT}") from e
        batch_size = self.default_batch_size if batch_size is None else batch_size
        max_length = self.max_seq_length if max_length is None else max_length
        if batch_size < 1 or batch_tokens < 1 or not 2 <= max_length <= 512:
            raise ValueError("batch_size and batch_tokens must be >= 1 and 2 <= max_length <= 512")
        model_path = self.default_model_path() if model_path is None else model_path
        tokenizer_path = self.default_tokenizer_path() if tokenizer_path is None else tokenizer_path
        tokenizer_json = pinned_bytes(tokenizer_path, self.tokenizer_sha256)
        check_model = lambda: verify_sha256(model_path, self.model_sha256)  # noqa: E731
        saved = (optimised_model(ort, model_path, self.model_sha256, check_model)
                 if model_cache else None)
        if saved is None:
            check_model()
        self.name = self.base_name + (
            "" if max_length == self.max_seq_length else f":max_length={max_length}")
        self.batch_size, self.batch_tokens = batch_size, batch_tokens
        # one question is tokenized in Python, the library's tokenizer built on first need
        self.tokenizer = QueryTokenizer(os.fspath(tokenizer_path), tokenizer_json, max_length)
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = intra_op_threads or default_threads()
        opts.inter_op_num_threads = 1
        opts.enable_cpu_mem_arena = bool(arena)
        opts.graph_optimization_level = (ort.GraphOptimizationLevel.ORT_ENABLE_ALL if saved is None
                                         else ort.GraphOptimizationLevel.ORT_DISABLE_ALL)
        opts.log_severity_level = 3
        self.session = ort.InferenceSession(os.fspath(saved or model_path), sess_options=opts,
                                            providers=["CPUExecutionProvider"])
        self._inputs = {i.name for i in self.session.get_inputs()}
        self.output_name = self.session.get_outputs()[0].name
        self._output_names = [o.name for o in self.session.get_outputs()]  # what run(None) returns
        self._model_path = model_path  # its sha256 checked above (embed/layer_major.py cuts it)

    def __getstate__(self) -> dict:
        return dict(self._args)

    def __setstate__(self, args: dict) -> None:
        self.__init__(**args)

    def with_threads(self, intra_op_threads: int) -> "OnnxEncoder":
        """The same embedder with another intra-op thread count (e.g. one per Dask worker);
        itself when it runs that many already (no second session)."""
        if intra_op_threads == self._args["intra_op_threads"]:
            return self
        return type(self)(**{**self._args, "intra_op_threads": intra_op_threads})

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
        """float32 (len(texts), dim), rows L2-normalised, in input order."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not len(texts):
            return out
        encs = self.tokenizer.encode_batch(list(texts), add_special_tokens=True)
        if len(encs) == 1:  # a query: no batching, padding or mask (the same values)
            ids = np.array([encs[0].ids], dtype=np.int64)
            feeds = {"input_ids": ids}
            if "attention_mask" in self._inputs:
                feeds["attention_mask"] = np.ones_like(ids)
            if "token_type_ids" in self._inputs:
                feeds["token_type_ids"] = np.zeros_like(ids)
            hidden = self.session.run(self._output_names, feeds)[0]
            out[:] = hidden[:, 0] if self.pooling == "cls" else hidden.sum(axis=1) / np.float32(ids.shape[1])
            return l2_normalize(out)
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
            if self.pooling == "cls":
                out[idx] = hidden[:, 0]
            else:
                m = mask[:, :, None].astype(np.float32)
                out[idx] = (hidden * m).sum(axis=1) / np.maximum(m.sum(axis=1), 1e-9)
        return l2_normalize(out)
