"""A saved, pre-optimised copy of an ONNX model: a cold process skips graph optimisation
and maps the weights instead of copying them (docs/architecture.md §3, "Cold start").

onnxruntime optimises a model every time a session opens it (constant folding turns the
int8 MiniLM's 23 MB into 90 MB of float32 weights, and the graph is rewritten on a
~250 MB heap), then packs each weight matrix for its CPU kernels. :func:`optimised_model`
does both once per model, onnxruntime version and CPU, and saves the optimised graph with
its weights, packed ones included, in a separate file, which a later session (optimisation
off) memory-maps. The copy is kept only when a probe input gives
bit-identical output from it and from a session on the original model; on load its files
are checked against the xxh3 digests written with it. The original's sha256 is checked
before a copy is made, and again whenever the original's size, mtime or inode differ from
those recorded with the copy (as ``make`` and git decide a file changed). Where: ``$HYPERRAG_FAST_CACHE`` (``config.MODEL_CACHE_ENV``),
else ``$XDG_CACHE_HOME/hyperrag_fast``, else ``~/.cache/hyperrag_fast``.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import platform
import shutil
import tempfile
from pathlib import Path
from typing import Callable

import numpy as np

from ..checksums import file_digest
from ..config import MODEL_CACHE_ENV

log = logging.getLogger(__name__)
_MODEL, _DATA, _STAMP = "model.onnx", "model.onnx.data", "stamp.json"
LAYOUT = "prepacked"  #: what a copy holds (copies of another layout are not read)


def cache_root() -> Path:
    """The folder of saved models (see the module docstring)."""
    if os.environ.get(MODEL_CACHE_ENV):
        return Path(os.environ[MODEL_CACHE_ENV])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "hyperrag_fast"


def _cpu_key() -> str:
    """What the optimised graph may depend on besides the model: the machine and its
    instruction set (the CPU flags on Linux)."""
    flags = ""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            flags = next((ln for ln in f if ln.startswith("flags")), "")
    except OSError:
        flags = platform.processor()
    return hashlib.sha256(f"{platform.machine()}|{flags}".encode()).hexdigest()[:12]


def _options(ort, level, threads: int = 1):
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.enable_cpu_mem_arena = False
    opts.graph_optimization_level = level
    opts.log_severity_level = 3
    return opts


def _probe(session, inputs: set[str]) -> np.ndarray:
    """Output for a fixed token batch (two rows, one padded)."""
    ids = np.array([[101, 2073, 2001, 1996, 2472, 1997, 1996, 2143, 2141, 1029, 102],
                    [101, 7592, 2088, 102, 0, 0, 0, 0, 0, 0, 0]], dtype=np.int64)
    feeds = {"input_ids": ids, "attention_mask": (ids > 0).astype(np.int64),
             "token_type_ids": np.zeros_like(ids)}
    return session.run(None, {k: v for k, v in feeds.items() if k in inputs})[0]


def _stat(path: Path) -> list[int]:
    st = path.stat()
    return [st.st_size, st.st_mtime_ns, st.st_ino]


def _stamp(folder: Path, ort_version: str) -> dict | None:
    """The copy's stamp when its files match their digests, else None."""
    try:
        stamp = json.loads((folder / _STAMP).read_text())
        ok = (stamp.get("onnxruntime") == ort_version
              and all(file_digest(folder / f, "xxh3_128") == stamp["xxh3_128"][f]
                      for f in (_MODEL, _DATA)))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return stamp if ok else None


def save_options(ort, out: Path, data_name: str):
    """Session options that optimise a model and save it to ``out``, its weights in the
    file ``data_name`` beside it, packed ones included: a session on the copy maps them
    instead of packing every matrix again (~25 ms CPU per process)."""
    opts = _options(ort, ort.GraphOptimizationLevel.ORT_ENABLE_ALL)
    opts.optimized_model_filepath = os.fspath(out)
    opts.add_session_config_entry("session.optimized_model_external_initializers_file_name",
                                  data_name)
    opts.add_session_config_entry("session.optimized_model_external_initializers_min_size_in_bytes",
                                  "1024")
    opts.add_session_config_entry("session.save_external_prepacked_constant_initializers", "1")
    return opts


def _make(ort, model_path: Path, folder: Path) -> bool:
    """Save the optimised copy of ``model_path`` into ``folder`` (new); True when the
    copy gives bit-identical probe output."""
    opts = save_options(ort, folder / _MODEL, _DATA)
    ref = ort.InferenceSession(os.fspath(model_path), sess_options=opts,
                               providers=["CPUExecutionProvider"])
    inputs = {i.name for i in ref.get_inputs()}
    copy = ort.InferenceSession(os.fspath(folder / _MODEL), providers=["CPUExecutionProvider"],
                                sess_options=_options(ort, ort.GraphOptimizationLevel.ORT_DISABLE_ALL))
    if not np.array_equal(_probe(ref, inputs), _probe(copy, inputs)):
        return False
    (folder / _STAMP).write_text(json.dumps({
        "onnxruntime": ort.__version__, "source": os.fspath(model_path),
        "source_stat": _stat(model_path),
        "xxh3_128": {f: file_digest(folder / f, "xxh3_128") for f in (_MODEL, _DATA)}}))
    return True


def optimised_model(ort, model_path: str | os.PathLike, model_sha256: str,
                    verify: Callable[[], None], root: Path | None = None) -> Path | None:
    """Path of the saved optimised copy of the model at ``model_path`` pinned by
    ``model_sha256``, made when missing. ``verify()`` checks the original's sha256 (it
    raises on a mismatch); it runs unless the original is the file the copy was made from
    (same path, size, mtime and inode). None (the caller optimises in memory, as before)
    when the cache folder is not writable or the copy is not bit-identical."""
    root = cache_root() if root is None else Path(root)
    model_path = Path(model_path)
    folder = root / "onnx" / f"{model_sha256[:16]}-ort{ort.__version__}-{_cpu_key()}-{LAYOUT}"
    stamp = _stamp(folder, ort.__version__)
    if stamp is not None:
        if (stamp.get("source") != os.fspath(model_path)
                or stamp.get("source_stat") != _stat(model_path)):
            verify()
        return folder / _MODEL
    verify()
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=folder.parent))
    except OSError as e:
        log.warning("cannot write the optimised-model cache under %s (%s): optimising in "
                    "memory", root, e)
        return None
    try:
        try:
            same = _make(ort, model_path, tmp)
        except Exception as e:  # noqa: BLE001  (onnxruntime's errors have no common base)
            log.warning("could not save an optimised copy of %s (%s): optimising in memory",
                        model_path, e)
            return None
        if not same:
            log.warning("the saved optimised model differs from the original on the probe "
                        "input: not used")
            return None
        if folder.exists() and _stamp(folder, ort.__version__) is None:  # a broken copy
            shutil.rmtree(folder, ignore_errors=True)
        try:
            os.replace(tmp, folder)
        except OSError:  # a racing process put its copy there first: that one is used
            pass
        return folder / _MODEL if _stamp(folder, ort.__version__) is not None else None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
