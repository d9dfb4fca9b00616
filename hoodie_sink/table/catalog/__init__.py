"""Catalogs a table is registered in (docs/hudi/hive-sync.md): the Hive metastore's Thrift client."""
