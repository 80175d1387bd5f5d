"""coda."""
