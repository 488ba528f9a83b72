"""Proposal sources: what offers drafts for a request's rows (proposals/source.py), the
built-in ones (the MTP head, prompt lookup, a grammar's forced tokens) and the registry
that names them for requests."""
