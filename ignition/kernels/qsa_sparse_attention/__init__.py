"""QSA's attention over each query's selected positions of its row's paged KV."""
