"""Process-wide trims for a one-shot process such as ``hyperrag query`` (docs/architecture.md
§3, "Cold start"). The CLI calls them; the library never does on its own (a host
application owns its process). None changes a result: the kernels run the same machine
code, the embedder the same session.

* :func:`import_numba`: ``import numba`` imports SciPy only to check its version, and
  PyYAML only to read a ``.numba_config.yaml`` in the working directory (~30 ms CPU
  together); both are hidden while Numba loads (PyYAML not when such a file is there).
* :func:`lean_cache_loads`: before loading a kernel from its cache, Numba refreshes its
  compile registries: it imports and installs the implementation of every Python and NumPy
  feature it can compile (~0.1 s CPU once per process, ``numba.np.arraymath`` among them).
  Cached machine code needs none of them, only Numba's runtime (NRT, whose symbols the
  code links to), so a cache load starts that alone; a kernel missing from the cache is
  compiled as usual (Numba's compiler refreshes the registries itself). The loaded code
  is the same bytes either way.
* the cache loads themselves (:func:`lean_cache_loads`, each trim skipped where this Numba
  lacks what it replaces): a cached kernel's file holds its machine code (an ELF object on
  Linux) and, for compiling *other* code that calls it, its LLVM bitcode. The bitcode is
  parsed (~40 ms CPU for all the query's kernels) only to list the symbols the object
  defines; they are read from the object's symbol table instead, and the bitcode is
  parsed if and when code linking against the kernel is compiled. Each kernel's runtime
  environments name a module (``numba.np.arrayobj`` for ``np.empty``, ...) that Numba
  imports (~30 ms) only to hand its namespace to the environment, which object-mode code
  alone reads; a module not yet imported is given a namespace holding its name. Numba's
  timing events around each of its ~3,000 calls into LLVM are not sent while a kernel is
  loaded (nothing listens to them then). Numba's runtime library (NRT's reference counts,
  compiled from LLVM IR by every process, ~25 ms CPU) is saved beside the kernels' cache
  once per Numba, llvmlite, Python and CPU and loaded from there. Typing an array
  argument does not import ``numpy.ma`` to rule out a masked array (none exists before
  it is imported).
* Numba's extension entry points (:func:`lean_cache_loads`): before every dispatch that
  may compile, Numba scans every installed distribution for ``numba_extensions`` entry
  points (``importlib.metadata``: ~10 ms CPU with its imports). Cached code needs no
  extension, so ``importlib.metadata`` is imported on first use and the scan runs where
  Numba's compiler loads its registries (a cache miss: the first compile), not before a
  dispatch. The library's kernels take arrays and scalars only (no extension type).
* :func:`import_usearch`: usearch imports ``urllib.request`` (for downloading its
  binaries; ~9 ms CPU with http.client, ssl and email); it is loaded on first use, and
  tqdm (progress bars; it looks up its own installed version through
  ``importlib.metadata``) when a bar is made.
* :func:`skip_blas_probe` (when :func:`lean_cache_loads` cannot be installed): Numba's
  registry refresh imports ``numba.np.arraymath``, which imports ``scipy.linalg`` (~0.15 s
  CPU, ~15 MB) only to learn whether BLAS backs ``np.convolve`` / ``np.correlate`` in
  compiled code. No kernel of this library uses them (nor ``np.dot``, which would import
  SciPy itself when compiled), so the probe is answered "no BLAS"; kernels compile to the
  same code.
* ``mmaps.trim_heap``: glibc keeps freed heap pages resident; onnxruntime's session setup
  frees ~60 MB of them (graph optimisation). ``malloc_trim(0)`` returns them.
* the garbage collector: importing Numba and loading its cached kernels creates ~10^5
  objects, and collecting them over and over (during imports, and at interpreter exit)
  cost ~0.3 s of CPU per ``hyperrag query``. The console entry (``console.run``) starts
  with the collector off; :func:`settle` freezes what the setup made (``gc.freeze``: kept
  for the life of the process, never scanned) and turns it back on, so a long
  ``--questions`` batch is collected as usual.

The console entry also sets NumPy's BLAS to one thread and ends a query process without
the interpreter's teardown (:mod:`hyperrag_fast.console`).
"""
from __future__ import annotations

import gc
import os
import struct
import sys
from contextlib import contextmanager

import numpy as np

from .mmaps import trim_heap

_BLAS = "scipy.linalg.cython_blas"
NUMBA_CONFIG_FILE = ".numba_config.yaml"  # what Numba's config reads PyYAML for


@contextmanager
def _hidden(*names: str):
    """``import NAME`` raises ImportError inside the block for each of ``names`` not yet
    imported (its parents untouched); ``sys.modules`` is restored on leaving, so a later
    import works as usual."""
    hide = [n for n in names if n not in sys.modules]
    for n in hide:
        sys.modules[n] = None  # type: ignore[assignment]
    try:
        yield
    finally:
        for n in hide:
            if sys.modules.get(n, 0) is None:
                del sys.modules[n]


def import_numba() -> None:
    """``import numba`` with SciPy (and PyYAML, unless ``.numba_config.yaml`` is in the
    working directory) hidden; nothing when Numba is imported already."""
    if "numba" in sys.modules:
        return
    yaml = () if os.path.exists(NUMBA_CONFIG_FILE) else ("yaml",)
    with _hidden("scipy", *yaml), _on_first_use("importlib.metadata"):
        import numba  # noqa: F401


def lean_cache_loads() -> bool:
    """Make Numba's cache loads skip the registry refresh (module docstring); True when
    installed (False when this Numba lacks the private ``Cache._load_overload`` it calls:
    loads then refresh as before)."""
    import_numba()
    from numba.core import caching
    cache = caching.Cache
    if getattr(cache.load_overload, "lean", False):
        return True
    if not callable(getattr(cache, "_load_overload", None)):
        return False

    def load_overload(self, sig, target_context):
        _start_runtime(target_context, self._cache_path)  # the runtime the cached code calls
        with _lean_rebuild(), self._guard_against_spurious_io_errors():
            return self._load_overload(sig, target_context)

    load_overload.lean = True  # type: ignore[attr-defined]
    cache.load_overload = load_overload
    _type_arrays_without_numpy_ma()
    _scan_entry_points_when_compiling()
    return True


def _scan_entry_points_when_compiling() -> None:
    """Numba's entry-point scan (``entrypoints.init_all``) is not run before each dispatch
    (``_compilation_chain_init_hook``) but where the CPU target loads its registries, the
    first compile (module docstring)."""
    from numba.core import dispatcher
    base = dispatcher._DispatcherBase
    hook = base.__dict__.get("_compilation_chain_init_hook")
    if hook is None or getattr(hook, "lean", False):
        return

    def no_scan(self):
        pass
    no_scan.lean = True  # type: ignore[attr-defined]
    base._compilation_chain_init_hook = no_scan


class _NotAnArray:
    """What ``np.ma.MaskedArray`` is while Numba types an array (no instance exists)."""


def _type_arrays_without_numpy_ma() -> None:
    """Numba types a NumPy array argument after checking it is no ``np.ma.MaskedArray``,
    which imports ``numpy.ma`` (~8 ms CPU). Before ``numpy.ma`` is imported no masked
    array exists, so the check is answered "no" without importing it."""
    from numba.core.typing.typeof import typeof_impl
    numba_typeof = typeof_impl.dispatch(np.ndarray)
    if getattr(numba_typeof, "lean", False):
        return
    no_ma = type(sys)("numpy.ma (not imported)")
    no_ma.MaskedArray = _NotAnArray

    def typeof_ndarray(val, c):
        if "numpy.ma" in sys.modules:
            return numba_typeof(val, c)
        np.ma = no_ma
        try:
            return numba_typeof(val, c)
        finally:
            if np.__dict__.get("ma") is no_ma:
                del np.ma
    typeof_ndarray.lean = True  # type: ignore[attr-defined]
    typeof_impl.register(np.ndarray, typeof_ndarray)


_SYM = np.dtype([("name", "<u4"), ("info", "u1"), ("other", "u1"), ("shndx", "<u2"),
                 ("value", "<u8"), ("size", "<u8")])  # an ELF64 symbol table entry


def elf_defined_symbols(obj: bytes) -> set[str] | None:
    """The names of the symbols a little-endian ELF64 object defines (not files or
    sections: what LLVM lists as its module's defined functions and globals); None when
    ``obj`` is not such an object."""
    if obj[:6] != b"\x7fELF\x02\x01":
        return None
    shoff, = struct.unpack_from("<Q", obj, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", obj, 0x3A)
    out: set[str] = set()
    for i in range(shnum):
        typ, off, size, link = struct.unpack_from("<4xI16xQQI", obj, shoff + i * shentsize)
        if typ != 2:  # SHT_SYMTAB
            continue
        str_off, str_size = struct.unpack_from("<QQ", obj, shoff + link * shentsize + 24)
        names = obj[str_off:str_off + str_size]
        syms = np.frombuffer(obj, _SYM, size // _SYM.itemsize, off)
        keep = (syms["shndx"] != 0) & (syms["name"] != 0) & ~np.isin(syms["info"] & 0xF, (3, 4))
        for at in syms["name"][keep].tolist():
            out.add(names[at:names.index(b"\0", at)].decode())
    return out


@contextmanager
def _lean_rebuild():
    """While a cached kernel is rebuilt: the trims of the module docstring (the bitcode
    parsed when needed, environments without imports, no LLVM-lock events)."""
    from llvmlite.binding import ffi
    from numba.core import codegen, environment
    lib_cls, lock = codegen.CPUCodeLibrary, getattr(ffi.lib, "_lock", None)
    saved = (lib_cls.__dict__["_unserialize"], environment._rebuild_env,
             getattr(lock, "_cblist", None))
    lib_cls._unserialize = classmethod(lambda c, cg, state: _unserialize(c, cg, state, saved[0]))
    environment._rebuild_env = _rebuild_env
    if saved[2] is not None:
        lock._cblist = []
    try:
        yield
    finally:
        lib_cls._unserialize, environment._rebuild_env = saved[:2]
        if saved[2] is not None:
            lock._cblist = saved[2]


def _unserialize(cls, codegen, state, numba_unserialize):
    """``CPUCodeLibrary._unserialize`` for an object-code cache entry, the symbols read
    from the object; other entries as Numba does (``numba_unserialize``)."""
    import llvmlite.binding as ll
    name, kind, data = state
    names = elf_defined_symbols(data[0]) if kind == "object" else None
    engine = getattr(codegen, "_engine", None)
    if names is None or not isinstance(getattr(engine, "_defined_symbols", None), set):
        return numba_unserialize.__func__(cls, codegen, state)
    object_code, shared_bitcode = data
    lib = codegen.create_library(name)
    lib.enable_object_caching()
    lib._set_compiled_object(object_code)
    lib._finalize_final_module()
    engine._defined_symbols |= names

    def module_for_linking():  # parsed once, when code calling this kernel is compiled
        if lib._shared_module is None:
            lib._shared_module = ll.parse_bitcode(shared_bitcode)
        return lib._shared_module
    lib._get_module_for_linking = module_for_linking
    return lib


def _start_runtime(ctx, folder: str) -> None:
    """``nrt.rtsys.initialize(ctx)`` with Numba's runtime library (its reference counts,
    compiled from LLVM IR in every process: ~25 ms CPU) read from ``folder`` (the kernels'
    cache) when a process saved it there, else compiled as Numba does and saved."""
    from numba.core.runtime import nrt, nrtdynmod
    compile_nrt = nrtdynmod.compile_nrt_functions
    nrtdynmod.compile_nrt_functions = lambda c: _nrt_library(c, folder, compile_nrt)
    try:
        nrt.rtsys.initialize(ctx)
    finally:
        nrtdynmod.compile_nrt_functions = compile_nrt


def _nrt_library(ctx, folder: str, compile_nrt):
    """The runtime's code library: the saved one of this Numba, llvmlite, Python and CPU
    (checked against the digest saved with it), else compiled (``compile_nrt``'s steps
    with its object code kept) and saved for the next process."""
    import hashlib
    import pickle

    import llvmlite
    import numba
    from numba.core.runtime import nrtdynmod
    codegen = ctx.codegen()
    key = hashlib.sha256(repr((numba.__version__, llvmlite.__version__, sys.version,
                               codegen.magic_tuple())).encode()).hexdigest()[:20]
    path = os.path.join(folder, f"hyperrag-nrt-{key}.nbo")
    try:
        with open(path, "rb") as f:
            digest, state = f.read(32), f.read()
        if hashlib.sha256(state).digest() == digest:
            with _lean_rebuild():
                return codegen.unserialize_library(pickle.loads(state))
    except OSError:
        pass
    create = getattr(nrtdynmod, "create_nrt_module", None)
    if create is None:
        return compile_nrt(ctx)
    ir_mod, library = create(ctx)
    library.enable_object_caching()  # keeps the object code to save; the same code
    library.add_ir_module(ir_mod)
    library.finalize()
    try:
        state = pickle.dumps(library.serialize_using_object_code(), protocol=4)
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "wb") as f:
            f.write(hashlib.sha256(state).digest() + state)
        os.replace(tmp, path)
    except OSError:
        pass
    return library


def _rebuild_env(modname, consts, env_name):
    """``numba.core.environment._rebuild_env`` without importing ``modname`` (its
    namespace is read by object-mode code only)."""
    from numba.core import environment
    env = environment.lookup_environment(env_name)
    if env is not None:
        return env
    mod = sys.modules.get(modname)
    env = environment.Environment(mod.__dict__ if mod is not None else {"__name__": modname})
    env.consts[:] = consts
    env.env_name = env_name
    environment.Environment._memo[env_name] = env
    return env


class _OnFirstUse(type(sys)):
    """A module standing in for one not imported yet: the first attribute read imports
    the real module (which then replaces it) and answers from it."""

    def __getattr__(self, attr):
        import importlib
        if sys.modules.get(self.__name__) is self:
            del sys.modules[self.__name__]
        return getattr(importlib.import_module(self.__name__), attr)


@contextmanager
def _on_first_use(name: str):
    """Inside the block, module ``name`` (not imported yet) is a stand-in that imports it
    on its first attribute read (:class:`_OnFirstUse`); the stand-in stays where the block
    put it (``sys.modules``, its parent's attribute) until then."""
    if name in sys.modules:
        yield
        return
    parent, _, child = name.rpartition(".")
    stand_in = _OnFirstUse(name)
    sys.modules[name] = stand_in
    if parent:
        setattr(sys.modules[parent], child, stand_in)
    yield


def import_usearch() -> None:
    """``import usearch.index`` (when installed) with ``urllib.request``, which usearch
    imports only to download binaries (http.client, ssl, email: ~9 ms CPU), imported on
    first use instead, and tqdm, which it imports for progress bars (with
    ``importlib.metadata`` and a look-up of tqdm's installed version), imported when a
    bar is made; nothing when usearch or ``urllib.request`` is imported already."""
    if "usearch.index" in sys.modules or "urllib.request" in sys.modules:
        return
    import urllib
    sys.modules["urllib.request"] = urllib.request = _OnFirstUse("urllib.request")  # type: ignore[attr-defined]
    bars = None if "tqdm" in sys.modules else type(sys)("tqdm")  # while usearch loads
    if bars is not None:
        bars.tqdm = _progress_bar  # what ``from tqdm import tqdm`` binds
        sys.modules["tqdm"] = bars
    try:
        import usearch.index  # noqa: F401
    except ImportError:  # not installed: the ANN load names the extra
        pass
    finally:
        if bars is not None and sys.modules.get("tqdm") is bars:
            del sys.modules["tqdm"]


def _progress_bar(*args, **kwargs):
    """``tqdm.tqdm(*args, **kwargs)``, tqdm imported on the first call."""
    from tqdm import tqdm
    return tqdm(*args, **kwargs)


def skip_blas_probe() -> bool:
    """Import ``numba.np.arraymath`` with SciPy's BLAS hidden, unless either is already
    imported; True when SciPy was kept out."""
    if "numba.np.arraymath" in sys.modules or _BLAS in sys.modules:
        return False
    import_numba()
    with _hidden(_BLAS):
        import numba.np.arraymath  # noqa: F401
    return True


def settle() -> None:
    """After an index is loaded: ``mmaps.trim_heap``; when the console entry turned the
    collector off, freeze the objects made so far and turn it back on."""
    trim_heap()
    if not gc.isenabled():
        gc.freeze()
        gc.enable()
