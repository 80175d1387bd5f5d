"""Memory maps that do not pile up in the resident set (a leaf module)."""
from __future__ import annotations

import mmap

import numpy as np


def release(a: np.ndarray | None) -> None:
    """Drop the resident pages of the memory map behind ``a`` (they are clean: the kernel
    re-reads them on the next access), so scanning a large matrix a block at a time does
    not leave all of it in the process's resident set."""
    while a is not None:
        mm = getattr(a, "_mmap", None)
        if mm is not None:
            try:
                mm.madvise(mmap.MADV_DONTNEED)
            except (AttributeError, OSError, ValueError):
                pass
            return
        a = getattr(a, "base", None)


def trim_heap() -> None:
    """Hand the C heap's free pages back to the kernel (glibc ``malloc_trim``; a no-op
    elsewhere). A build frees many small objects (spaCy documents, partition lists, the
    BM25 fit) that glibc keeps resident; trimming before the ANN stage keeps them from
    adding to its peak (docs/architecture.md §10). ``lean.settle`` trims after a
    one-shot query process loads (what the ONNX session setup freed)."""
    import ctypes
    try:  # the process's own symbols hold libc's: no ctypes.util.find_library, which
        ctypes.CDLL(None).malloc_trim(0)  # runs ldconfig in a subprocess (~25 ms CPU)
    except (OSError, AttributeError):
        pass


#: glibc's M_MMAP_THRESHOLD for a build step that sets it (:func:`map_large_allocations`)
MMAP_THRESHOLD = 256 * 1024


def map_large_allocations() -> None:
    """Serve every allocation of ``MMAP_THRESHOLD`` bytes or more by its own memory map
    (glibc ``mallopt(M_MMAP_THRESHOLD)``; a no-op elsewhere), so freeing a large buffer
    hands it straight back to the kernel. glibc's default threshold grows with each large
    buffer freed (up to 32 MB), after which such buffers come from the heap and stay
    resident once freed: the ONNX runs and NumPy temporaries of ``hyperrag build-methods``
    kept ~130 MB that way during CODA's name embedding (docs/architecture.md §7). For a
    process that owns its allocator (the CLI), not for a library call."""
    import ctypes
    try:
        ctypes.CDLL(None).mallopt(-3, MMAP_THRESHOLD)  # M_MMAP_THRESHOLD = -3
    except (OSError, AttributeError):
        pass
