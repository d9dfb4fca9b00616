"""The metadata-table fixtures (tests/fixtures/metadata-tables, written by Hudi 0.15.0), unzipped."""

from __future__ import annotations

import zipfile
from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "metadata-tables"
MDT_TABLES = ("cow_mdt_v6", "mor_mdt_v6", "mor_files_only_mdt_v6")


def unzip_mdt_table(name: str, dest: Path) -> Path:
    """Unzip fixture `name` into `dest` and return the data table's folder."""
    with zipfile.ZipFile(FIXTURES / f"{name}.zip") as z:
        z.extractall(dest)
    return dest / name
