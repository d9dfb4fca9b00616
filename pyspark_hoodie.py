"""Auto-registration: Spark imports top-level `pyspark_*` modules and registers `DefaultSource`.

With hoodie_sink installed, `df.write.format("hoodie")` works without any register call
(docs/spark/python-datasource.md#auto-registration).
"""

from hoodie_sink.datasource.source import HoodieDataSource as DefaultSource

__all__ = ["DefaultSource"]
