"""Option value parsers shared by the write options (write_config.py) and the catalog sync's
(sync_config.py): each takes the option's key, for the error, and its raw string value."""

from __future__ import annotations

from hoodie_sink.errors import HoodieConfigError


def parse_bool(key: str, v: str) -> bool:
    s = v.strip().lower()
    if s in ("true", "1", "yes"):
        return True
    if s in ("false", "0", "no"):
        return False
    raise HoodieConfigError(f"Option '{key}' must be true or false, got '{v}'.")
