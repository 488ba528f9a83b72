"""QSA's block-key compression into the paged key cache, and the pending raw-key rings."""
