"""QSA's block-key compression at block boundaries, into the paged compressed-key cache."""
