"""SQL: INSERT INTO / INSERT OVERWRITE through a temporary view; catalog tables fail clearly."""

from __future__ import annotations

import pytest

from tests.support.tables import assert_table_matches, hudi_rs_timeline


def test_insert_into_and_overwrite_a_temporary_view(spark, tmp_path):
    path = tmp_path / "t"
    spark.sql(
        f"""CREATE OR REPLACE TEMPORARY VIEW trips_v (id BIGINT, city STRING, fare DOUBLE)
            USING hoodie OPTIONS (path '{path}', primaryKey 'id',
            'hoodie.datasource.write.partitionpath.field' 'city', 'hoodie.table.name' 'trips')"""
    )
    spark.sql("INSERT INTO trips_v SELECT id, IF(id % 2 = 0, 'sf', 'la'), id * 1.0 FROM range(100)")
    spark.sql("INSERT INTO trips_v SELECT id, IF(id % 2 = 0, 'sf', 'la'), id * 2.0 FROM range(50, 150)")
    expected = {i: {"id": i, "city": "sf" if i % 2 == 0 else "la", "fare": float(i)} for i in range(100)}
    expected.update(
        {i: {"id": i, "city": "sf" if i % 2 == 0 else "la", "fare": i * 2.0} for i in range(50, 150)}
    )
    assert_table_matches(path, list(expected.values()))  # INSERT INTO upserts by key (Hudi's default)
    assert spark.sql("SELECT count(*) AS n FROM trips_v").first().n == 150
    spark.sql("INSERT OVERWRITE trips_v SELECT id, 'ny', 0.5 FROM range(3)")
    assert_table_matches(path, [{"id": i, "city": "ny", "fare": 0.5} for i in range(3)])
    assert len(hudi_rs_timeline(path).get_completed_replacecommits()) == 1


def test_insert_into_a_catalog_table_points_to_the_view_form(spark, tmp_path):
    spark.sql("DROP TABLE IF EXISTS hoodie_catalog_t")
    spark.sql(f"CREATE TABLE hoodie_catalog_t (id BIGINT) USING hoodie LOCATION '{tmp_path / 'c'}'")
    with pytest.raises(Exception, match="CREATE TEMPORARY VIEW"):
        spark.sql("INSERT INTO hoodie_catalog_t SELECT id FROM range(3)")
    assert not (tmp_path / "c" / ".hoodie").exists()
    spark.sql("DROP TABLE IF EXISTS hoodie_catalog_t")


def test_select_from_a_view_sees_every_insert_into_it(spark, tmp_path):
    """Spark 4.3 plans a view's read once and reuses it for every later query; each query must
    still read the latest completed instant (pinned by the query's creation time)."""
    path = tmp_path / "t"
    spark.sql(
        f"""CREATE OR REPLACE TEMPORARY VIEW fresh_v (id BIGINT, city STRING)
            USING hoodie OPTIONS (path '{path}', primaryKey 'id',
            'hoodie.datasource.write.partitionpath.field' 'city')"""
    )
    spark.sql("INSERT INTO fresh_v SELECT id, IF(id % 2 = 0, 'sf', 'la') FROM range(4)")
    assert spark.sql("SELECT count(*) AS n FROM fresh_v").first().n == 4  # plans the view's read
    spark.sql("INSERT INTO fresh_v SELECT id, 'ny' FROM range(4, 10)")  # a new partition, new files
    assert spark.sql("SELECT count(*) AS n FROM fresh_v").first().n == 10
    assert spark.sql("SELECT count(*) AS n FROM fresh_v WHERE city = 'ny'").first().n == 6
    # the filtered query's plan (pruned to 'ny') is reused by the next unfiltered one: not its filters
    assert spark.sql("SELECT count(*) AS n FROM fresh_v").first().n == 10
    spark.sql("INSERT OVERWRITE fresh_v SELECT id, 'sf' FROM range(2)")
    assert sorted(r.id for r in spark.sql("SELECT id FROM fresh_v").collect()) == [0, 1]
    assert_table_matches(path, [{"id": i, "city": "sf"} for i in range(2)])
