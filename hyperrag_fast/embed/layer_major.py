"""Layer-major batch-1 runs of an int8 ONNX encoder (docs/architecture.md §7, "Layer-major
name runs"): the model is cut once into its embeddings and one graph per encoder layer, and a
block of texts goes through a piece at a time, each text still one batch-1 run per piece,
so every vector is the one :meth:`OnnxEncoder.embed` gives at batch one (bit for bit);
one layer's int8 weights (~1.8 MB for bge-small) stay in the core's L2 cache while the
block passes instead of all layers' being read per text (2Wiki's 43k names: 1.7x).

Cutting needs the ``onnx`` package, once per model, onnxruntime version and CPU: each
piece is saved pre-optimised, its weights (packed ones included) in a separate file that
later sessions memory-map (as ``embed/onnx_cache.py`` does for the whole model), under
the same cache root. The saved pieces are kept only when a probe set of texts gives
bit-identical vectors through them and through the encoder; on load their files are
checked against the xxh3 digests written with them. Models whose nodes do not name their
layers (``/encoder/layer.N/``; e.g. the MiniLM export) cannot be cut: ValueError.
"""
from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Sequence

import numpy as np

from ..checksums import file_digest
from .base import l2_normalize
from .onnx_cache import _cpu_key, _options, cache_root, save_options
from .onnx_encoder import import_onnxruntime

ONNX_HINT = ('layer-major embedding (settings.CODA_LAYER_MAJOR / $HYPERRAG_FAST_LAYER_MAJOR) '
             'needs the onnx package to cut the model once: pip install onnx '
             '(or "hyperrag_fast[offline]")')
_LAYER = re.compile(r"/encoder/layer\.(\d+)/")
_STAMP = "stamp.json"
PROBE = ("Who directed the film?", "Paris", "Ludwig van Beethoven (1770-1827)", "x",
         "The Lord of the Rings: The Return of the King", "São Paulo FC", "1999")


def cut(model_path: str | os.PathLike) -> list[tuple[list[str], list[str], bytes]]:
    """[(input names, output names, serialized graph)]: the embeddings, then each layer.
    A node outside every ``/encoder/layer.N/`` goes with the latest piece its inputs come
    from (the embeddings when none); a piece's inputs are the tensors it reads from
    earlier pieces or the model's inputs, its outputs those later pieces or the model
    output read."""
    try:
        import onnx
        from onnx.utils import Extractor
    except ImportError as e:
        raise ImportError(f"{ONNX_HINT} ({e})") from e
    m = onnx.shape_inference.infer_shapes(onnx.load(os.fspath(model_path)))
    g = m.graph
    consts = {i.name for i in g.initializer} | {
        o for n in g.node if n.op_type == "Constant" for o in n.output}
    seg_of: dict[str, int] = {}
    seg = []
    for n in g.node:  # ONNX graphs are topologically sorted
        r = _LAYER.search(n.name) or _LAYER.search(n.output[0])
        s = int(r.group(1)) if r else max([seg_of.get(x, -1) for x in n.input] or [-1])
        seg.append(s)
        seg_of.update((o, s) for o in n.output)
    layers = max(seg) + 1
    if layers < 1:
        raise ValueError(f"{model_path}: no node names an encoder layer (/encoder/layer.N/); "
                         "this model cannot be cut for layer-major runs")
    used: dict[str, set[int]] = {}
    for n, s in zip(g.node, seg):
        for x in n.input:
            used.setdefault(x, set()).add(s)
    final = g.output[0].name
    ex, out = Extractor(m), []
    for i in range(-1, layers):
        nodes = [n for n, s in zip(g.node, seg) if s == i and n.op_type != "Constant"]
        ins = sorted({x for n in nodes for x in n.input
                      if x and x not in consts and seg_of.get(x, -2) != i})
        outs = sorted({o for n in nodes for o in n.output if used.get(o, set()) - {i}
                       or o == final})
        out.append((ins, outs, ex.extract_model(ins, outs).SerializeToString()))
    if final not in out[-1][1]:
        raise ValueError(f"{model_path}: the model output is not made by the last layer's piece")
    return out


class LayerMajor:
    """``embed(texts)``: the vectors ``enc`` gives at batch one, run a piece at a time over
    blocks of ``block`` texts (one thread per call; the sessions are shared, so calls from
    several threads may run at once). Made by :func:`layer_major`."""

    def __init__(self, enc, parts: list, block: int) -> None:
        self.enc, self.parts, self.block = enc, parts, block
        # what a text's state keeps after each piece: the tensors later pieces read and
        # the output (a block's earlier layers are let go: peak memory, not speed)
        need, self.keep = {enc.output_name}, []
        for ins, _, _ in reversed(parts):
            self.keep.append(frozenset(need))
            need = need | set(ins)
        self.keep.reverse()

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.enc.dim), np.float32)
        if not len(texts):
            return out
        encs = self.enc.tokenizer.encode_batch(list(texts), add_special_tokens=True)
        for b in range(0, len(encs), self.block):
            states = []
            for e in encs[b:b + self.block]:
                a = np.asarray([e.ids], np.int64)
                states.append({"input_ids": a, "attention_mask": np.ones_like(a),
                               "token_type_ids": np.zeros_like(a)})
            for (ins, outs, s), keep in zip(self.parts, self.keep):
                for r, st in enumerate(states):
                    st.update(zip(outs, s.run(outs, {k: st[k] for k in ins})))
                    states[r] = {k: v for k, v in st.items() if k in keep}
            for r, st in enumerate(states):
                h = st[self.enc.output_name]
                if self.enc.pooling == "cls":
                    out[b + r] = h[0, 0]
                else:  # as OnnxEncoder.embed's batched path with a mask of ones
                    m = np.ones((1, h.shape[1], 1), np.float32)
                    out[b + r] = ((h * m).sum(axis=1) / np.maximum(m.sum(axis=1), 1e-9))[0]
        return l2_normalize(out)


def _folder(ort, enc, root: Path | None) -> Path:
    root = cache_root() if root is None else Path(root)
    return root / "onnx" / f"{enc.model_sha256[:16]}-ort{ort.__version__}-{_cpu_key()}-layers"


def _load(ort, folder: Path, enc, block: int) -> LayerMajor | None:
    """The saved pieces as sessions (weights mapped), or None when missing or damaged."""
    try:
        stamp = json.loads((folder / _STAMP).read_text())
        if stamp.get("onnxruntime") != ort.__version__ or not all(
                file_digest(folder / f, "xxh3_128") == d for f, d in stamp["xxh3_128"].items()):
            return None
        parts = [(ins, outs, ort.InferenceSession(
            os.fspath(folder / f"piece{i:02d}.onnx"), providers=["CPUExecutionProvider"],
            sess_options=_options(ort, ort.GraphOptimizationLevel.ORT_DISABLE_ALL)))
            for i, (ins, outs) in enumerate(stamp["pieces"])]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return LayerMajor(enc, parts, block)


def _save(ort, model_path: str, folder: Path) -> None:
    """Cut the model and save each piece optimised into ``folder`` (new)."""
    pieces = cut(model_path)
    for i, (_, _, raw) in enumerate(pieces):
        opts = save_options(ort, folder / f"piece{i:02d}.onnx", f"piece{i:02d}.onnx.data")
        ort.InferenceSession(raw, sess_options=opts, providers=["CPUExecutionProvider"])
    files = sorted(p.name for p in folder.iterdir())
    (folder / _STAMP).write_text(json.dumps({
        "onnxruntime": ort.__version__, "source": os.fspath(model_path),
        "pieces": [[ins, outs] for ins, outs, _ in pieces],
        "xxh3_128": {f: file_digest(folder / f, "xxh3_128") for f in files}}))


def _save_in_child(model_path: str, folder: Path) -> None:
    """:func:`_save` in a child process: the cut holds the model and its shape-inferred
    copy (bge-small: +190 MB) and leaves ``onnx`` and its heap behind (+130 MB), which
    would raise the build's peak on first use."""
    if sys.modules.get("onnx", 0) is None or (
            "onnx" not in sys.modules and importlib.util.find_spec("onnx") is None):
        raise ImportError(ONNX_HINT)
    pkg = os.fspath(Path(__file__).resolve().parents[2])  # this package's code in the child
    code = ("import sys; sys.path.insert(0, sys.argv[1]); "
            "from hyperrag_fast.embed.layer_major import _child; _child(*sys.argv[2:])")
    r = subprocess.run([sys.executable, "-c", code, pkg, os.fspath(model_path),
                        os.fspath(folder)], capture_output=True, text=True)
    if r.returncode == 3:
        raise ImportError(f"{ONNX_HINT} ({r.stderr.strip()})")
    if r.returncode == 4:  # the model cannot be cut
        raise ValueError(r.stderr.strip())
    if r.returncode != 0:
        raise RuntimeError(f"cutting {model_path} into layer pieces failed:\n{r.stderr[-2000:]}")


def _child(model_path: str, folder: str) -> None:
    try:
        import onnx  # noqa: F401
    except ImportError as e:
        print(e, file=sys.stderr)
        raise SystemExit(3)
    try:
        _save(import_onnxruntime(), model_path, Path(folder))
    except ValueError as e:
        print(e, file=sys.stderr)
        raise SystemExit(4)


def layer_major(enc, block: int, root: Path | None = None) -> LayerMajor:
    """A :class:`LayerMajor` runner for ``enc`` (an :class:`OnnxEncoder` of batch one),
    its pieces cut and saved on first use (needs ``onnx``), then mapped. RuntimeError when
    new pieces do not give ``enc``'s vectors bit for bit on :data:`PROBE` (then not kept);
    saved ones are checked against their digests (damaged: cut again). The cut runs in a
    child process (:func:`_save_in_child`)."""
    if getattr(enc, "batch_size", None) != 1:
        raise ValueError(f"layer-major runs reproduce batch-1 vectors; {enc.name} embeds in "
                         f"batches of {getattr(enc, 'batch_size', '?')}")
    ort = import_onnxruntime()
    folder = _folder(ort, enc, root)
    lm = _load(ort, folder, enc, block)
    if lm is not None:  # checked on the probe when made; its files against their digests
        return lm
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=folder.parent))
    try:
        _save_in_child(enc._model_path, tmp)
        made = _load(ort, tmp, enc, block)
        # one batch-1 run per text, as the names are embedded
        if made is None or not np.array_equal(made.embed(list(PROBE)), enc.embed(list(PROBE))):
            raise RuntimeError(f"the layer-major pieces cut from {enc.name} do not reproduce "
                               "its batch-1 vectors on the probe texts; refusing them")
        del made
        if folder.exists():
            shutil.rmtree(folder, ignore_errors=True)
        try:
            os.replace(tmp, folder)
        except OSError:  # a racing process put its pieces there first
            pass
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    lm = _load(ort, folder, enc, block)
    if lm is None:
        raise RuntimeError(f"could not load the layer-major pieces saved under {folder}")
    return lm
