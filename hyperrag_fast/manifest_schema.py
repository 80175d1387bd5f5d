"""The shape of ``manifest.json`` (docs/architecture.md §3), checked on every load.

The manifest holds the checksums of the other files; its seal (``manifest.xxh3``,
:func:`hyperrag_fast.checksums.check_seal`) catches damage, but not a hand-edited one
sealed again, one read with ``--no-verify`` or one saved before seals: such a manifest
must fail here, as :class:`IndexCorruptedError` naming the key, not later as a
``KeyError`` or ``TypeError`` deep in the loader (issue 24). A leaf module.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from .errors import IndexCorruptedError

_INT = (int,)
# key -> (type, required sub-keys with their types)
_SHAPE: dict[str, tuple[type, dict[str, tuple[type, ...]]]] = {
    "files": (dict, {}),
    "counts": (dict, {"chunks": _INT, "nodes": _INT, "edges": _INT, "groups": _INT}),
    "embedder": (dict, {"name": (str,), "dim": _INT}),
    "extractor": (str, {}),
    "merge": (str, {}),
    "chunking": (dict, {"max_tokens": _INT, "overlap": _INT}),
    "ann": (dict, {}),
}
_OPTIONAL = {"ann_files": dict, "chunk_vectors": str, "prebuilt": dict}
_STRUCTURE = re.compile(r"^[a-z0-9_]{1,64}$")  # a prebuilt structure's name
_ANN_KEYS = {"backend": str, "exact_threshold": int, "connectivity": int, "expansion_add": int,
             "expansion_search": int, "threads": int, "storage": str, "backends": dict}


def check_manifest(manifest: dict[str, Any], where: Path) -> None:
    """IndexCorruptedError unless every key the loader reads is there with its type."""
    def bad(what: str) -> IndexCorruptedError:
        return IndexCorruptedError(f"{where}: manifest {what}")

    for key, (kind, subkeys) in _SHAPE.items():
        if key not in manifest:
            raise bad(f"lacks {key!r}")
        v = manifest[key]
        if not isinstance(v, kind):
            raise bad(f"{key!r} is a {type(v).__name__}, expected a {kind.__name__}")
        for sub, types in subkeys.items():
            if sub not in v:
                raise bad(f"{key!r} lacks {sub!r}")
            if not isinstance(v[sub], types) or isinstance(v[sub], bool):
                raise bad(f"{key}.{sub} is {type(v[sub]).__name__}, expected "
                          f"{' or '.join(t.__name__ for t in types)}")
    for key, kind in _OPTIONAL.items():
        if key in manifest and not isinstance(manifest[key], kind):
            raise bad(f"{key!r} is a {type(manifest[key]).__name__}, expected a {kind.__name__}")
    for key in ("files", "ann_files"):
        for rel, value in manifest.get(key, {}).items():
            if not isinstance(rel, str) or not isinstance(value, str):
                raise bad(f"{key!r} entries must map names to strings")
    for name, files in manifest.get("prebuilt", {}).items():
        if not (isinstance(name, str) and _STRUCTURE.match(name) and isinstance(files, dict)
                and files):
            raise bad("'prebuilt' entries must map structure names to their files")
        for rel, value in files.items():
            if not (isinstance(rel, str) and isinstance(value, str)
                    and rel.startswith(f"prebuilt/{name}/")):
                raise bad("'prebuilt' lists a file outside prebuilt/<structure>/")
    for k, v in manifest["ann"].items():
        if k not in _ANN_KEYS:
            raise bad(f"'ann' has an unknown setting {k!r}")
        if not isinstance(v, _ANN_KEYS[k]) or isinstance(v, bool):
            raise bad(f"ann.{k} is {type(v).__name__}, expected {_ANN_KEYS[k].__name__}")
