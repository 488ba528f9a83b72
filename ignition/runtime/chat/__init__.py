"""Chat templates: loading a model's templates, rendering messages in a sandbox, and the
token offsets where each rendered message ends."""
