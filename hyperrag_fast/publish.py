"""Writing an index directory (docs/architecture.md §3; the layout is in
:mod:`hyperrag_fast.store`): the single-writer lock, a new generation written and fsynced
beside the live one, CURRENT replaced atomically, leftovers of crashed writers removed.
:mod:`hyperrag_fast.store` reads what this module writes and never imports it.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

import filelock
import numpy as np

from .config import LOCK_TIMEOUT_S
from .checksums import manifest_checksums, write_manifest
from .errors import IndexCorruptedError, IndexLockedError
from .paths import is_link
from .store import (_GEN, CURRENT, FORMAT_VERSION, LEXICAL, MANIFEST, SCRATCH_PREFIX, VECTOR_KINDS,
                    StoredIndex, current_generation)
from .texts import TEXTS, extraction_to_json

LOCK = ".lock"  # the writer lock's file in an index directory, never part of an index
_POINTER_TMP = f".{CURRENT}.tmp-"
_LEGACY = (MANIFEST, TEXTS, "arrays", "vectors", "ann")  # format <= 3 kept these at the root
# before issue 24 prebuilt structures were saved beside the generations (never read now:
# ``hyperrag upgrade`` adopts them while stamped with the live generation, else removed)
_OLD_PREBUILT = "prebuilt"
#: ``hook(step)`` called at each named publish step, installed by :func:`set_step_hook`
#: (tests: SIGKILL the process there); None in every normal run
StepHook = Callable[[str], None]
_step_hook: StepHook | None = None


def _seq(name: str) -> int | None:
    m = _GEN.match(name)
    return int(m.group(1)) if m else None


# ------------------------------------------------------------------- files
_FSYNC_THREADS = 8  # fsyncs in flight at once (32 files: 0.13 s one by one, 0.02 s on 8)


def _fsync_path(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _npy_file_of(a: np.ndarray) -> Path | None:
    """The .npy file ``a`` is a whole read-only memory map of, if any."""
    if not isinstance(a, np.memmap) or a.filename is None or not a.flags.c_contiguous:
        return None
    try:
        with open(a.filename, "rb") as f:
            version = np.lib.format.read_magic(f)
            read = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                    else np.lib.format.read_array_header_2_0)
            shape, fortran, dtype = read(f)
            offset = f.tell()
    except (OSError, ValueError):
        return None
    if fortran or shape != a.shape or dtype != a.dtype or offset != a.offset:
        return None
    return Path(a.filename)


def _write_npy(path: Path, a: np.ndarray) -> None:
    """Write ``a`` as .npy; a whole memory-mapped .npy file is hard-linked (or copied)
    instead of read through memory."""
    path.parent.mkdir(parents=True, exist_ok=True)
    src = _npy_file_of(a)
    if src is not None:
        try:
            os.link(src, path)
            return
        except OSError:
            pass
        try:
            shutil.copyfile(src, path)
            return
        except OSError:  # its generation was pruned: the memory map still reads
            pass
    np.save(path, np.ascontiguousarray(a), allow_pickle=False)


def _write_sqlite(path: Path, s: StoredIndex) -> None:
    con = sqlite3.connect(path)
    try:
        con.executescript("""
            CREATE TABLE chunks (idx INTEGER PRIMARY KEY, chunk_id TEXT UNIQUE, doc_id TEXT,
                title TEXT, text TEXT, start INTEGER, "end" INTEGER, metadata TEXT,
                extraction TEXT);
            CREATE INDEX chunks_doc ON chunks(doc_id);
            CREATE TABLE nodes (idx INTEGER PRIMARY KEY, name TEXT, description TEXT);
            CREATE TABLE edges (idx INTEGER PRIMARY KEY, text TEXT);
            CREATE TABLE groups (idx INTEGER PRIMARY KEY, key TEXT);
        """)
        con.executemany("INSERT INTO chunks VALUES (?,?,?,?,?,?,?,?,?)", (
            (i, c.chunk_id, c.doc_id, c.title, c.text, c.start, c.end,
             json.dumps(c.metadata, ensure_ascii=False, default=str), extraction_to_json(ex))
            for i, (c, ex) in enumerate(zip(s.chunks, s.extractions))))
        con.executemany("INSERT INTO nodes VALUES (?,?,?)",
                        ((i, n, d) for i, (n, d) in enumerate(zip(s.node_name, s.node_desc))))
        con.executemany("INSERT INTO edges VALUES (?,?)", enumerate(s.edge_text))
        con.executemany("INSERT INTO groups VALUES (?,?)", enumerate(s.group_key))
        con.commit()
    finally:
        con.close()


# ------------------------------------------------------------------- writer lock
def _check_replaceable(root: Path) -> None:
    """FileExistsError unless ``root`` is absent, an index (any format), or holds only
    what a writer leaves (lock, generations, pointer temp files, build scratch folders)."""
    if not root.exists():
        return
    if not root.is_dir():
        raise FileExistsError(f"{root} exists and is not an index directory; "
                              f"refusing to replace it")
    names = set(os.listdir(root))
    if CURRENT in names or MANIFEST in names:
        return
    foreign = [n for n in names if n != LOCK and not _GEN.match(n)
               and not n.startswith((_POINTER_TMP, SCRATCH_PREFIX))]
    if foreign:
        raise FileExistsError(f"{root} exists and is not an index directory (it holds "
                              f"{sorted(foreign)[:3]}); refusing to replace it")


@contextmanager
def writer_lock(path: str | os.PathLike, timeout: float = LOCK_TIMEOUT_S,
                create: bool = True) -> Iterator[Path]:
    """Hold the single-writer lock of index directory ``path`` (the file ``<path>/.lock``).

    Wrap a whole read-modify-write in it (load, add/delete, save); :func:`save_index`
    takes it too, re-entrantly when the calling thread holds it already. Another process
    or thread holding it is waited for up to ``timeout`` seconds (0: refuse at once;
    negative: wait indefinitely), then :class:`IndexLockedError`. ``create`` makes the
    directory if need be (else FileNotFoundError). Readers never take this lock.
    """
    root = Path(os.path.realpath(path))
    if not create and not root.is_dir():
        raise FileNotFoundError(f"no index directory at {path}")
    _check_replaceable(root)
    root.mkdir(parents=True, exist_ok=True)
    if is_link(root / LOCK):
        raise IndexCorruptedError(f"{root / LOCK}: the writer lock is a symbolic link; remove "
                                  f"it (a writer never follows one)")
    lock = filelock.FileLock(root / LOCK, is_singleton=True)
    try:
        lock.acquire(timeout=timeout)
    except filelock.Timeout:
        raise IndexLockedError(
            f"{path} is being written by another writer (lock {root / LOCK}); try again "
            f"when it is done, or wait for it with --lock-timeout SECONDS "
            f"(API: hyperrag_fast.publish.writer_lock(path, timeout=...))") from None
    try:
        yield root
    finally:
        lock.release()


# ------------------------------------------------------------------- first builds
_FIRST = "-first"  # SCRATCH_PREFIX + pid + this: a first build runs (a file, under the lock)


def unfinished_build(path: str | os.PathLike) -> bool:
    """Whether ``path`` is what a killed first build (``hyperrag index``) left: no index
    published and only a writer's leftovers (the lock, unpublished generations, pointer
    temp files, build scratch), or an index published by a first build that died before
    it finished (its marker names a process that is gone). The next build proceeds into
    it under the lock (a running build holds it: the newcomer waits or is refused)."""
    root = Path(path)
    if not root.is_dir() or is_link(root):
        return False
    names = os.listdir(root)
    if any(n.startswith(SCRATCH_PREFIX) and n.endswith(_FIRST) and not _alive(n) for n in names):
        return True
    if not names or CURRENT in names or MANIFEST in names:
        return False
    return all(n == LOCK or _GEN.match(n) or n.startswith((_POINTER_TMP, SCRATCH_PREFIX))
               for n in names)


@contextmanager
def first_build(root: Path) -> Iterator[None]:
    """Mark a first build of index folder ``root`` (the caller holds its lock) until it
    has published, so that one killed after publishing is still seen as unfinished."""
    marker = root / f"{SCRATCH_PREFIX}{os.getpid()}{_FIRST}"
    marker.touch()
    try:
        yield
    finally:
        marker.unlink(missing_ok=True)


# ------------------------------------------------------------------- publishing
def set_step_hook(hook: StepHook | None) -> StepHook | None:
    """Install ``hook(step)``, called at each named step of a publish ("cleaned",
    "generation_partial", "generation_written", "pointer_temp", "pointer_replaced",
    "pruning"); None removes it. Returns the previous hook. Only tests install one
    (tests/test_store_concurrency.py kills the process at each step)."""
    global _step_hook
    previous, _step_hook = _step_hook, hook
    return previous


def _kill_point(step: str) -> None:
    """A named publish step: run the installed step hook, if any."""
    if _step_hook is not None:
        _step_hook(step)


def _rmtree_generation(d: Path) -> None:
    """Remove a generation, manifest first: a half-removed one is never complete. A
    symbolic link in its place is removed itself, never what it points at."""
    if is_link(d):
        d.unlink()
        return
    try:
        (d / MANIFEST).unlink()
    except FileNotFoundError:
        pass
    _kill_point("pruning")
    shutil.rmtree(d, ignore_errors=True)


def _alive(scratch_name: str) -> bool:
    """Whether the process that named a build scratch folder is this one or still runs."""
    try:
        pid = int(scratch_name[len(SCRATCH_PREFIX):].split("-", 1)[0])
    except ValueError:
        return False
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _remove_leftovers(root: Path, keep: set[str]) -> None:
    """Under the lock: remove generations not in ``keep``, pointer temp files, the root
    files of a format <= 3 index once CURRENT exists, and the ``.<name>.tmp-*`` /
    ``.<name>.old-*`` folders the format <= 3 save left beside the index."""
    for n in sorted(os.listdir(root)):
        p = root / n
        if is_link(p) and (_GEN.match(n) or n.startswith((_POINTER_TMP, SCRATCH_PREFIX))
                           or n in _LEGACY or n == _OLD_PREBUILT):
            if not _GEN.match(n) or n not in keep:
                p.unlink()  # a link in the index folder: never followed
        elif _GEN.match(n) and n not in keep:
            _rmtree_generation(p)
        elif n.startswith(_POINTER_TMP):
            p.unlink(missing_ok=True)
        elif n in _LEGACY and (root / CURRENT).is_file():
            shutil.rmtree(p) if p.is_dir() else p.unlink()
        elif n == _OLD_PREBUILT and (root / CURRENT).is_file() and not _adoptable(p, root):
            shutil.rmtree(p) if p.is_dir() else p.unlink()
        elif n.startswith(SCRATCH_PREFIX) and not _alive(n):  # a killed build's scratch
            shutil.rmtree(p, ignore_errors=True) if p.is_dir() else p.unlink(missing_ok=True)
    aside = re.compile(rf"^\.{re.escape(root.name)}\.(tmp|old)-[0-9a-f]{{8}}$")
    for p in root.parent.iterdir():
        if aside.match(p.name) and p.is_dir() and not is_link(p):
            shutil.rmtree(p, ignore_errors=True)


def _adoptable(old_prebuilt: Path, root: Path) -> bool:
    """Whether structures saved beside the generations name the live one (stamp)."""
    try:
        with open(old_prebuilt / "GENERATION", "rb") as f:
            stamp = f.read(64).decode("ascii", "replace").strip()
        return not is_link(old_prebuilt / "GENERATION") and stamp == current_generation(root)
    except (OSError, IndexCorruptedError):
        return False


def _clean(root: Path) -> str | None:
    """Remove a crashed writer's leftovers, keeping the live and the previous generation
    (a reader may still be opening it). Returns the live generation's name."""
    try:
        live = current_generation(root)
    except IndexCorruptedError:  # an unreadable pointer: keep every generation
        live, keep = None, {n for n in os.listdir(root) if _GEN.match(n)}
    else:
        keep = set()
        if live is not None:
            older = [n for n in os.listdir(root) if _GEN.match(n) and _seq(n) < _seq(live)]
            keep = {live, *([max(older, key=_seq)] if older else [])}
    _remove_leftovers(root, keep)
    return live


def _write_generation(gen: Path, s: StoredIndex,
                      write_ann: Callable[[Path], dict[str, str]] | None) -> None:
    for name, a in s.arrays.items():
        _write_npy(gen / "arrays" / f"{name}.npy", a)
    for name in VECTOR_KINDS:
        v = s.vectors[name]
        _write_npy(gen / "vectors" / f"{name}.npy",
                   v if v.dtype == np.float32 else np.asarray(v, np.float32))
    _kill_point("generation_partial")
    ann_files: dict[str, str] = {}
    if write_ann is not None:
        (gen / "ann").mkdir()
        ann_files = {k: f"ann/{v}" for k, v in write_ann(gen / "ann").items()}
    _write_sqlite(gen / TEXTS, s)
    (gen / LEXICAL).write_text(json.dumps(s.lexical, ensure_ascii=False), encoding="utf-8")
    files = sorted(p for p in gen.rglob("*") if p.is_file())
    manifest = dict(s.manifest, format_version=FORMAT_VERSION, ann_files=ann_files,
                    **manifest_checksums(gen, files))
    _seal_and_sync(gen, manifest, files)


def _seal_and_sync(gen: Path, manifest: dict, files: list[Path]) -> None:
    """Write the manifest and its seal, then fsync every file, then every folder, of
    ``gen``, on a few threads: each fsync waits for a flush of the disk's cache (~4 ms
    here, written data or not), which fsyncs in flight together share."""
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(_FSYNC_THREADS) as pool:
        list(pool.map(_fsync_path, [*files, *write_manifest(gen, manifest)]))
        list(pool.map(_fsync_path, {p.parent for p in files} | {gen}))


def _link(src: Path, dst: Path, rels) -> list[Path]:
    """Hard links (copies where links fail) of files ``rels`` of ``src`` under ``dst``."""
    out = []
    for rel in rels:
        (dst / rel).parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(src / rel, dst / rel)
        except OSError:
            shutil.copy2(src / rel, dst / rel)
        out.append(dst / rel)
    return out


def _next_generation(root: Path) -> Path:
    seqs = [_seq(n) for n in os.listdir(root) if _GEN.match(n)]
    return root / f"gen-{max(seqs, default=0) + 1:06d}-{uuid.uuid4().hex[:8]}"


def _publish(root: Path, name: str) -> None:
    """Point CURRENT at generation ``name``: write temp + fsync + os.replace (atomic)."""
    tmp = root / f"{_POINTER_TMP}{uuid.uuid4().hex[:8]}"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(name + "\n")
        f.flush()
        os.fsync(f.fileno())
    _fsync_path(root)  # the new generation's entry
    _kill_point("pointer_temp")
    os.replace(tmp, root / CURRENT)
    _kill_point("pointer_replaced")
    _fsync_path(root)


def save_index(path: str | os.PathLike, s: StoredIndex,
               write_ann: Callable[[Path], dict[str, str]] | None = None) -> Path:
    """Write ``s`` as a new generation of index directory ``path`` and publish it
    (see the module docstring); returns the generation directory.

    ``write_ann(dir)`` writes ANN files into ``dir`` and returns ``{kind: file name}``.
    ``s.manifest`` gets ``format_version``, ``files`` (sha256), ``xxh3_128`` and
    ``ann_files`` added.
    Takes the writer lock (timeout 0) unless this thread holds it. If anything fails
    before publishing, the new generation is removed and the live one stays untouched.
    """
    with writer_lock(path) as root:
        live = _clean(root)
        _kill_point("cleaned")
        gen = _next_generation(root)
        gen.mkdir()
        try:
            _write_generation(gen, s, write_ann)
        except BaseException:
            shutil.rmtree(gen, ignore_errors=True)
            raise
        _kill_point("generation_written")
        _publish(root, gen.name)
        _remove_leftovers(root, {gen.name, *([live] if live else [])})
    return gen
