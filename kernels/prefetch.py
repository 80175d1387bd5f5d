"""Software prefetch of embedding rows (a hint; no effect on any result).

The query kernels read embedding rows at random (candidate states, hyperedges of
activated states, group members' hyperedges and chunks: STITCH-RAG §3.3 steps 2-5, 8).
One 64-d float32 row is 4 cache lines, so a dot product waits on memory; asking for the
rows a few steps ahead lets those fetches overlap (3.5x fewer ns per random 64-d dot
product on this machine, 1.5x at 384-d: ``benchmarks/README.md``).
"""
from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from ._config import jit


@intrinsic
def _prefetch(typingctx, mat, i, j):
    """llvm.prefetch(&mat[i, j] (2-D) or &mat[i] (1-D, j ignored), read, high locality,
    data cache)."""
    if not (isinstance(mat, types.Array) and mat.ndim in (1, 2)):
        return None
    sig = types.void(mat, i, j)

    def codegen(context, builder, signature, args):
        aryty = signature.args[0]
        ary = context.make_array(aryty)(context, builder, args[0])
        idx = [context.cast(builder, args[1], signature.args[1], types.intp)]
        if aryty.ndim == 2:
            idx.append(context.cast(builder, args[2], signature.args[2], types.intp))
        ptr = cgutils.get_item_pointer(context, builder, aryty, ary, idx, wraparound=False,
                                       boundscheck=False)
        i8p = ir.IntType(8).as_pointer()
        i32 = ir.IntType(32)
        fnty = ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32])
        fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.prefetch.p0i8")
        builder.call(fn, [builder.bitcast(ptr, i8p), ir.Constant(i32, 0), ir.Constant(i32, 3),
                          ir.Constant(i32, 1)])
        return context.get_dummy_value()

    return sig, codegen


@jit
def prefetch_row(mat, i):
    """Ask for every cache line of row ``i`` of a C-contiguous 2-D array (0 <= i < rows)."""
    step = max(1, 64 // mat.itemsize)
    for j in range(0, mat.shape[1], step):
        _prefetch(mat, i, j)


@jit
def prefetch_at(arr, i):
    """Ask for the cache line of ``arr[i]`` (1-D, 0 <= i < len)."""
    _prefetch(arr, i, 0)
