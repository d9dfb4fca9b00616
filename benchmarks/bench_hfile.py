"""Benchmark: writing and reading an HFile of --cells cells (36-byte keys, ~60-byte values), the
shape of the record-level index's files (docs/hudi/hfile.md#writing).

Timed, best of --repeat:

  write_hfile GZ     hoodie_sink's writer, 1 MiB blocks, gzip (Hudi's default)
  write_hfile NONE   the same without compression
  naive loop NONE    a per-cell Python loop building the same uncompressed cell stream (struct.pack
                     per cell, no blocks): what the vectorised path replaces
  parquet            the reference: pyarrow writing the same keys and values to an uncompressed
                     Parquet file in memory
  read all (GZ)      HFileReader(...).keys_and_values()
  get x1000          1000 point lookups at random (a fresh reader each, no block reused), then
                     in key order on one reader (it keeps its last 4 parsed blocks)

Ratios are against the parquet reference measured in the same run (>1: slower than parquet).
"""

from __future__ import annotations

import argparse
import io
import struct
import time
from collections.abc import Callable

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from hoodie_sink.table.format.hfile import HFileReader, write_hfile


def best(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def naive_cells(keys: list[bytes], values: list[bytes]) -> bytes:
    tail = b"\x00" + struct.pack(">q", 0x7FFFFFFFFFFFFFFF) + b"\x04"
    out = bytearray()
    for k, v in zip(keys, values, strict=True):
        out += struct.pack(">iih", len(k) + 12, len(v), len(k)) + k + tail + v + b"\x00"
    return bytes(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cells", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    n = args.cells
    rng = np.random.default_rng(7)
    keys = pa.array(sorted(f"{i:08x}-{rng.integers(1 << 62):027x}".encode() for i in range(n)), pa.binary())
    sizes = rng.integers(55, 66, n)
    values = pa.array([rng.bytes(int(s)) for s in sizes], pa.binary())
    key_list, value_list = keys.to_pylist(), values.to_pylist()

    def parquet() -> None:
        pq.write_table(pa.table({"k": keys, "v": values}), io.BytesIO(), compression="NONE")

    rows = []
    ref = best(parquet, args.repeat)
    rows.append(("parquet (reference)", ref))
    rows.append(("write_hfile GZ", best(lambda: write_hfile(keys, values), args.repeat)))
    rows.append(
        ("write_hfile NONE", best(lambda: write_hfile(keys, values, compression="NONE"), args.repeat))
    )
    rows.append(("naive loop NONE (cells only)", best(lambda: naive_cells(key_list, value_list), 1)))
    data = write_hfile(keys, values)
    rows.append(("read all (GZ)", best(lambda: HFileReader(data).keys_and_values(), args.repeat)))
    probe = [key_list[int(i)] for i in rng.integers(0, n, 1000)]
    reader = HFileReader(data)
    rows.append(("get x1000 random (GZ)", best(lambda: [HFileReader(data).get(k) for k in probe], 1)))
    rows.append(("get x1000 in key order (GZ)", best(lambda: [reader.get(k) for k in sorted(probe)], 1)))
    print(f"{n:,} cells, GZ file {len(data) / 2**20:.1f} MiB, {reader.trailer.data_index_count} data blocks")
    for name, seconds in rows:
        print(f"  {name:32s} {seconds:8.3f} s   x{seconds / ref:6.2f} parquet")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
