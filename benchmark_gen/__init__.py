"""benchmark_gen: deterministic retrieval benchmarks generated from ctx-lsp's code graph."""
