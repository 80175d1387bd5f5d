"""Compiled core (Numba @njit kernels over plain NumPy arrays), shipped as hyperrag_fast.kernels."""
