"""The write plan: every decision of one write made once, when it begins (coordinator.begin),
and carried to its tasks and its commit in the write context (context.py).

The options say what was asked, hoodie.properties what the table is; the plan is what this write
does: its operation, its index, how its records merge, the table's settings, how record keys and
partition paths are made, how base files are written and how large they grow.  Tasks read this
one typed object instead of deciding again from the options.
"""

from __future__ import annotations

from dataclasses import dataclass

from hoodie_sink.errors import HoodieConfigError
from hoodie_sink.table.format.keygen import KeyGenConfig
from hoodie_sink.table.format.merge_rule import MergeRule
from hoodie_sink.table.format.properties import MERGE_ON_READ, TableConfig
from hoodie_sink.table.format.write_operation import WriteOperation
from hoodie_sink.table.index.protocol import Index
from hoodie_sink.table.options.write_config import WriteConfig
from hoodie_sink.table.write.base_file_writer import ParquetSettings, parquet_settings_of


@dataclass(frozen=True)
class FileSizing:
    """How large base files grow, and which stored ones are small enough to take inserts
    (Hudi's small-file handling: hoodie.parquet.max.file.size, hoodie.parquet.small.file.limit)."""

    max_file_size: int
    small_file_limit: int
    small_file_candidates_limit: int  # merge-on-read: how many small file groups of a partition take inserts
    avg_record_size: (
        int  # bytes per record: of the latest commits, else hoodie.copyonwrite.record.size.estimate
    )

    def room(self, file_size: int) -> int:
        """How many more records a base file of `file_size` bytes takes; 0 when it is not small."""
        if not 0 < file_size < self.small_file_limit:
            return 0
        return max(0, (self.max_file_size - file_size) // max(self.avg_record_size, 1))

    def records_per_file_group(self) -> int:
        """How many inserts a new file group is planned for: a full file at the average record
        size (Hudi's insert split size when it auto-tunes, its default)."""
        return max(1, self.max_file_size // max(self.avg_record_size, 1))


@dataclass(frozen=True)
class WritePlan:
    operation: WriteOperation
    index: Index
    merge_rule: MergeRule  # how the write's records merge, among themselves and with the stored ones
    table: TableConfig  # hoodie.properties, as the write found (or created) it
    keygen: KeyGenConfig
    parquet: ParquetSettings
    sizing: FileSizing

    @staticmethod
    def of(
        cfg: WriteConfig, operation: WriteOperation, index: Index, table: TableConfig, avg_record_size: int
    ) -> WritePlan:
        """The plan of a write whose options were resolved against `table` (table_setup.py), with
        the operation and index begin resolved first (to check the options and the input)."""
        return WritePlan(
            operation=operation,
            index=index,
            merge_rule=MergeRule.of_write(
                cfg.precombine_field,
                cfg.commit_time_ordering,
                operation.deletes,
                cfg.partial_update,
                cfg.debezium,
            ),
            table=table,
            keygen=keygen_config_of(cfg),
            parquet=parquet_settings_of(cfg),
            sizing=FileSizing(
                cfg.max_file_size, cfg.small_file_limit, cfg.small_file_candidates_limit, avg_record_size
            ),  # fmt: skip
        )

    @property
    def merge_on_read(self) -> bool:
        return self.table.table_type == MERGE_ON_READ


def keygen_config_of(cfg: WriteConfig) -> KeyGenConfig:
    """The key generator of a write (options resolved against the table); raises
    HoodieConfigError for options that no key generator can run with."""
    kind = cfg.resolved_keygen
    if kind == "TIMESTAMP":
        # Java's TimestampBasedAvroKeyGenerator requires both (KeyGenUtils.checkRequiredProperties)
        for option, value in (("hoodie.keygen.timebased.timestamp.type", cfg.ts_type),
                              ("hoodie.keygen.timebased.output.dateformat", cfg.ts_output_format)):  # fmt: skip
            if not value:
                raise HoodieConfigError(
                    f"Key generator TIMESTAMP needs option '{option}' (the table at {cfg.path} does not "
                    f"record it either). Help: set it, e.g. timestamp.type=EPOCHMILLISECONDS and "
                    f"output.dateformat=yyyy/MM/dd."
                )
    return KeyGenConfig(
        keygen_type=kind,
        record_key_fields=cfg.record_key_fields,
        partition_fields=cfg.partition_fields if kind != "NON_PARTITION" else (),
        hive_style=cfg.hive_style,
        url_encode=cfg.url_encode,
        timestamp_type=cfg.ts_type,
        input_date_format=cfg.ts_input_format,
        output_date_format=cfg.ts_output_format or "yyyy-MM-dd",
        timezone=cfg.ts_timezone or "UTC",
        keyless=not cfg.record_key_fields,
        allow_ambiguous_keys=cfg.allow_ambiguous_complex_keys,
    )
