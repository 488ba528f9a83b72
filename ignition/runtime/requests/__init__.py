"""A request as the engine receives, tracks and answers it: the request and its sampling
parameters, the errors that refuse one, the engine's per-request state, and detokenization."""
