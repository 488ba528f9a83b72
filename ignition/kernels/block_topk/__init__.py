"""QSA's block selection: each query's best complete blocks, ties broken as transformers does."""
