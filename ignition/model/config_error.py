"""The one error a bad config.json raises (its own module so config parts can import it)."""

from __future__ import annotations


class ConfigError(ValueError):
    """A config.json that does not describe a valid model.

    ``detail`` is the message without its source prefix, so a loader can re-attribute
    an error raised while the dataclass validates itself to the file it came from.
    """

    def __init__(self, source: str, detail: str) -> None:
        super().__init__(f"{source}: {detail}")
        self.detail = detail
