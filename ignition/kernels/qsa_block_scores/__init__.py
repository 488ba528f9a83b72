"""QSA's block scoring: each packed query's score of every visible block key of its row."""
