"""The index build: streaming partitions (``pipeline``), the flat assembler (``flat``),
the on-disk vector table (``vectors``), distinct rows for the ANN (``distinct``), stage
figures (``clock``) and the Dask scale-out (``distributed``). See docs/architecture.md."""
