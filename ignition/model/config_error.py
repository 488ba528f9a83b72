"""The one error a bad config.json raises (its own module so config parts can import it)."""

from __future__ import annotations


class ConfigError(ValueError):
    """A config.json that does not describe a valid model; ``detail`` is the message without
    its source, so a loader can re-attribute it to the file."""

    def __init__(self, source: str, detail: str) -> None:
        super().__init__(f"{source}: {detail}")
        self.detail = detail
