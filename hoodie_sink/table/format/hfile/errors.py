"""The error a damaged HFile raises."""

from __future__ import annotations


class CorruptHFile(ValueError):
    """An HFile whose bytes do not hold together: a bad magic, checksum, length or encoding.
    The message names what is wrong and, when known, the file."""

    def __init__(self, what: str, name: str | None = None) -> None:
        super().__init__(f"corrupt HFile {name}: {what}" if name else f"corrupt HFile: {what}")
        self.what = what
        self.name = name
