"""QSA's block-key compression at block boundaries, into the paged compressed-key cache, and
the slots' pending raw keys (the incomplete block's members) kept at commit."""
