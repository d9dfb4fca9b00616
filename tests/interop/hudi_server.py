"""Apache Hudi (Java) as a test oracle: a Spark session with a Hudi bundle, driven over JSON lines.

Runs in the interop virtualenv (pyspark 3.5.1; see run.sh `ensure_interop`), never in the test
process: Hudi's bundles do not run on our PySpark 4.  One server process per Hudi version is
started for the whole test session (a JVM with the bundle takes ~15 s to start) and answers one
request per line on stdin:

    {"op": "<function name below>", "args": {...}}  ->  {"ok": true, "result": ...}
                                                        {"ok": false, "error": "...", "trace": "..."}

Replies go to the original stdout only; everything else the process or its JVM prints goes to
stderr, so log lines can never be taken for a reply.  Data crosses as Parquet files: the test
writes its input with pyarrow, `read` writes Java's answer as one Parquet file.

Usage: python hudi_server.py --jar <bundle.jar> [--timezone America/Los_Angeles]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback

REPLY = None  # the original stdout, set in main()
SPARK = None


# -- operations --------------------------------------------------------------------------------
def version() -> dict:
    jvm = SPARK._jvm
    tz = jvm.java.util.TimeZone.getDefault().getID()
    catalog = SPARK.conf.get("spark.sql.catalogImplementation", "in-memory")
    return {"spark": SPARK.version, "hudi": _hudi_version(), "jvm_timezone": tz, "catalog": catalog}


def write(path: str, input: str, options: dict, mode: str = "append") -> dict:
    """df.write.format("hudi") of the Parquet file(s) at `input`; `seconds`: the write alone (a
    benchmark's figure: no request or reply in it)."""
    df = SPARK.read.parquet(input)
    start = time.perf_counter()
    df.write.format("hudi").options(**options).mode(mode).save(path)
    return {"seconds": time.perf_counter() - start}


def stream(path: str, input: str, schema: str, checkpoint: str, options: dict) -> dict:
    """A structured-streaming query into format("hudi") over the Parquet files in `input`, one
    file per micro-batch, run to the end (availableNow); `seconds`: start to termination."""
    df = SPARK.readStream.schema(schema).option("maxFilesPerTrigger", 1).parquet(input)
    start = time.perf_counter()
    q = (
        df.writeStream.format("hudi").options(**options).option("checkpointLocation", checkpoint)
        .trigger(availableNow=True).start(path)
    )  # fmt: skip
    q.awaitTermination()
    seconds = time.perf_counter() - start
    if q.exception():
        raise RuntimeError(str(q.exception()))
    progress = [json.loads(p.json()) if hasattr(p, "json") else p for p in q.recentProgress]
    batch_seconds = [p["durationMs"]["triggerExecution"] / 1000 for p in progress if p["numInputRows"] > 0]
    return {"seconds": seconds, "batches": len(progress), "batch_seconds": batch_seconds}


def read(path: str, out: str, options: dict | None = None) -> dict:
    """spark.read.format("hudi") (snapshot, or time travel with as.of.instant) -> one Parquet file."""
    df = SPARK.read.format("hudi").options(**(options or {})).load(path)
    df.coalesce(1).write.mode("overwrite").parquet(out)
    return {"rows": df.count(), "out": out}


def sql(statement: str) -> list:
    """A Spark SQL statement (e.g. a Hudi procedure: call run_clustering(path => ...))."""
    return [r.asDict(recursive=True) for r in SPARK.sql(statement).collect()]


def query(statement: str, out: str, refresh: list | None = None) -> dict:
    """A Spark SQL query's rows -> one Parquet file (`spark.table(name)` is `SELECT * FROM name`;
    with --hive-metastore the names resolve through the Hive metastore and Hudi's catalog).
    `refresh`: tables to refresh first (REFRESH TABLE): Spark caches a data source table's resolved
    relation, Hudi's file index with its file listing in it, for the session, so another writer's
    later commits are seen only after a refresh."""
    for name in refresh or ():
        SPARK.catalog.refreshTable(name)
    df = SPARK.sql(statement)
    df.coalesce(1).write.mode("overwrite").parquet(out)
    return {"out": out, "plan": df._jdf.queryExecution().executedPlan().toString()}


def catalog_table(name: str) -> dict:
    """What Spark's session catalog (Hudi's HoodieCatalog over Spark's Hive external catalog) makes
    of a metastore table: its provider, location, partition columns, schema and storage properties."""
    t = (
        SPARK._jsparkSession.sessionState()
        .catalog()
        .getTableMetadata(
            SPARK._jvm.org.apache.spark.sql.catalyst.TableIdentifier.apply(
                name.split(".")[1], _some(name.split(".")[0])
            )
        )
    )
    return {
        "provider": str(t.provider().get()) if t.provider().isDefined() else None,
        "table_type": str(t.tableType().name()),
        "location": str(t.location()),
        "partition_columns": [str(c) for c in _seq(t.partitionColumnNames())],
        "schema": json.loads(t.schema().json()),
        "storage_properties": {str(k): str(v) for k, v in _map(t.storage().properties()).items()},
    }


def _some(value):
    return SPARK._jvm.scala.Option.apply(value)


def _seq(seq) -> list:
    return list(SPARK._jvm.scala.collection.JavaConverters.seqAsJavaList(seq).toArray())


def _map(m) -> dict:
    jm = SPARK._jvm.scala.collection.JavaConverters.mapAsJavaMap(m)
    return {e.getKey(): e.getValue() for e in jm.entrySet().toArray()}


def timeline(path: str, completed_only: bool = True) -> list:
    """The active timeline as Java's HoodieTableMetaClient loads it: [[time, action, state], ...]."""
    tl = _meta_client(path).getActiveTimeline()
    if completed_only:
        tl = tl.filterCompletedInstants()
    return [[_instant_time(i), i.getAction(), i.getState().name()] for i in tl.getInstants().toArray()]


def commits(path: str) -> list:
    """hudi-cli's `commits show`: the completed commit-like instants with their write stats."""
    meta = _meta_client(path)
    tl = meta.getActiveTimeline().getCommitsTimeline().filterCompletedInstants()
    out = []
    for inst in tl.getInstants().toArray():
        md = _commit_metadata(meta, tl, inst)
        out.append(
            {
                "time": _instant_time(inst),
                "action": inst.getAction(),
                "operation": str(md.getOperationType()),
                "files_inserted": int(md.fetchTotalFilesInsert()),
                "files_updated": int(md.fetchTotalFilesUpdated()),
                "records_written": int(md.fetchTotalRecordsWritten()),
                "updates_written": int(md.fetchTotalUpdateRecordsWritten()),
                "partitions": sorted(str(p) for p in md.getPartitionToWriteStats().keySet().toArray()),
            }
        )
    return out


def file_slices(path: str, partitions: list) -> dict:
    """hudi-cli's `show fsview latest`: partition -> sorted [[file id, base instant, base file], ...]
    from Java's file-system view over the completed commits timeline."""
    jvm = SPARK._jvm
    meta = _meta_client(path)
    tl = meta.getActiveTimeline().getCommitsAndCompactionTimeline().filterCompletedAndCompactionInstants()
    views = jvm.org.apache.hudi.common.table.view.HoodieTableFileSystemView
    try:  # 0.x
        view = views(meta, tl)
    except Exception:  # noqa: BLE001 - 1.x: a listing-based view is built by a factory
        context = jvm.org.apache.hudi.common.engine.HoodieLocalEngineContext(meta.getStorageConf())
        view = views.fileListingBasedFileSystemView(context, meta, tl)
    out = {}
    for part in partitions:
        rows = []
        for fs in view.getLatestFileSlices(part).toArray():
            base = fs.getBaseFile()
            rows.append(
                [
                    fs.getFileId(),
                    fs.getBaseInstantTime(),
                    base.get().getFileName() if base.isPresent() else None,
                ]
            )
        out[part] = sorted(rows)
    view.close()
    return out


def archived_timeline(path: str) -> list:
    """The archived timeline as Java loads it (HoodieArchivedTimeline, with details): one dict per
    instant with its time, action, state and, for completed commits, the rows their stats name."""
    meta = _meta_client(path)
    tl = meta.getArchivedTimeline()
    tl.loadCompletedInstantDetailsInMemory()  # the archived timeline loads details on demand
    out = []
    for inst in tl.getInstants().toArray():
        item = {"timestamp": _instant_time(inst), "action": inst.getAction(), "state": inst.getState().name()}
        if inst.getAction() in ("commit", "deltacommit", "replacecommit") and inst.isCompleted():
            item["records_written"] = int(_commit_metadata(meta, tl, inst).fetchTotalRecordsWritten())
        out.append(item)
    return out


def clean_details(path: str) -> list:
    """Every completed clean of the active timeline, decoded by Java: its plan (CleanerUtils) and
    its metadata (TimelineMetadataUtils)."""
    jvm = SPARK._jvm
    meta = _meta_client(path)
    tl = meta.getActiveTimeline().getCleanerTimeline().filterCompletedInstants()
    out = []
    for inst in tl.getInstants().toArray():
        md = jvm.org.apache.hudi.common.table.timeline.TimelineMetadataUtils.deserializeHoodieCleanMetadata(
            tl.getInstantDetails(inst).get()
        )
        requested = jvm.org.apache.hudi.common.table.timeline.HoodieTimeline.getCleanRequestedInstant(
            _instant_time(inst)
        )
        plan = jvm.org.apache.hudi.common.util.CleanerUtils.getCleanerPlan(meta, requested)
        deleted = sorted(
            str(f) for pm in md.getPartitionMetadata().values() for f in pm.getSuccessDeleteFiles().toArray()
        )
        planned = sorted(
            str(i.getFilePath())
            for files in plan.getFilePathsToBeDeletedPerPartition().values()
            for i in files.toArray()
        )
        out.append(
            {
                "timestamp": _instant_time(inst),
                "earliest_commit_to_retain": str(md.getEarliestCommitToRetain()),
                "policy": str(plan.getPolicy()),
                "total_deleted": int(md.getTotalFilesDeleted()),
                "deleted": deleted,
                "planned": planned,
            }
        )
    return out


def savepoints(path: str) -> list:
    """The completed savepoints as Java lists and decodes them (TimelineMetadataUtils)."""
    jvm = SPARK._jvm
    tl = _meta_client(path).getActiveTimeline().getSavePointTimeline().filterCompletedInstants()
    out = []
    for inst in tl.getInstants().toArray():
        md = jvm.org.apache.hudi.common.table.timeline.TimelineMetadataUtils.deserializeHoodieSavepointMetadata(
            tl.getInstantDetails(inst).get()
        )
        files = {str(p): sorted(str(f) for f in pm.getSavepointDataFile().toArray())
                 for p, pm in md.getPartitionMetadata().items()}  # fmt: skip
        out.append({"timestamp": _instant_time(inst), "by": str(md.getSavepointedBy()),
                    "comments": str(md.getComments()), "files": files})  # fmt: skip
    return out


def restores(path: str) -> list:
    """The completed restores as Java decodes them: the instants each rolled back."""
    jvm = SPARK._jvm
    tl = _meta_client(path).getActiveTimeline().getRestoreTimeline().filterCompletedInstants()
    out = []
    for inst in tl.getInstants().toArray():
        md = jvm.org.apache.hudi.common.table.timeline.TimelineMetadataUtils.deserializeHoodieRestoreMetadata(
            tl.getInstantDetails(inst).get()
        )
        out.append(
            {
                "timestamp": _instant_time(inst),
                "rolled_back": [str(t) for t in md.getInstantsToRollback().toArray()],
            }
        )
    return out


def properties(path: str) -> dict:
    """hoodie.properties as Java's HoodieTableConfig loads it (checksum validated on load)."""
    cfg = _meta_client(path).getTableConfig()
    props = cfg.getProps()
    return {str(k): str(props.getProperty(k)) for k in props.stringPropertyNames().toArray()}


# -- the metadata table (MDT) as Java reads it ------------------------------------------------------
# What a Java writer or reader of a table with `.hoodie/metadata` trusts (docs/hudi/metadata-table-oracle.md):
# the partition and file listing of HoodieBackedTableMetadata (the MDT's `files` partition, read on the
# MDT's completed timeline and filtered by the data table's completed instants) and the file-system
# view built on it.  Each has a file-system-backed twin (FileSystemBackedTableMetadata, a listing-based
# view) that answers the same question from storage; the checks compare the two.
PARTITION_METADATA = ".hoodie_partition_metadata"


def metadata_listing(path: str) -> dict:
    """Java's MDT reader (HoodieBackedTableMetadata, metadata enabled): {"partitions": {partition:
    [[file name, size], ...] sorted}, "synced_instant": its latest completed MDT deltacommit or None,
    "latest_instant": the MDT timeline's latest completed instant or None, "timeline": the MDT's
    instants [[time, action, state], ...] (completed and pending), "mdt_partitions": the MDT
    partitions hoodie.properties lists}.  Fails when the table has no MDT Java would use (its readers
    then fall back to listing storage, which would hide a missing MDT from the comparison)."""
    meta = _meta_client(path)
    cfg = meta.getTableConfig()
    if not cfg.isMetadataTableAvailable():
        raise RuntimeError(f"{path}: hoodie.properties lists no metadata-table partition (no MDT to read)")
    md = _table_metadata(meta, metadata=True)
    try:
        if not md.enabled():
            raise RuntimeError(f"{path}: Java's HoodieBackedTableMetadata is not enabled on this table")
        partitions = _listing(md, path)
        synced = md.getSyncedInstantTime()
        synced = str(synced.get()) if synced.isPresent() else None
    finally:
        md.close()
    mdt_timeline = metadata_timeline(path)
    completed = [i for i in mdt_timeline if i[2] == "COMPLETED"]
    return {
        "partitions": partitions,
        "synced_instant": synced,
        "latest_instant": completed[-1][0] if completed else None,
        "timeline": mdt_timeline,
        "mdt_partitions": sorted(str(p) for p in cfg.getMetadataPartitions().toArray()),
    }


def read_filtered(path: str, out: str, where: str, options: dict | None = None) -> dict:
    """spark.read.format("hudi") with a filter (a SQL expression), e.g. with hoodie.enable.data.skipping
    and the column stats index on: Java prunes files by the metadata table's column_stats partition
    -> one Parquet file of the matching rows."""
    df = SPARK.read.format("hudi").options(**(options or {})).load(path).filter(where)
    df.coalesce(1).write.mode("overwrite").parquet(out)
    return {"rows": df.count(), "out": out}


def _file_pairs(files: list):
    jvm = SPARK._jvm
    pairs = jvm.java.util.ArrayList()
    for partition, name in files:
        pairs.add(jvm.org.apache.hudi.common.util.collection.Pair.of(partition, name))
    return pairs


def column_stats(path: str, files: list, columns: list) -> dict:
    """Java's merged view of the column_stats partition (HoodieTableMetadata.getColumnStats) for
    `files` ([[partition, file name], ...]) and `columns`: {"<partition>/<file>": {column: [min, max,
    null count, value count]}}, bounds unwrapped (py4j converts Java numbers and strings); a file or
    column without a live record is absent."""
    md = _table_metadata(_meta_client(path), metadata=True)
    out: dict = {}
    try:
        pairs = _file_pairs(files)
        for column in columns:
            found = md.getColumnStats(pairs, column)
            for entry in found.entrySet().toArray():
                key, stats = entry.getKey(), entry.getValue()
                name = f"{key.getLeft()}/{key.getRight()}" if key.getLeft() else str(key.getRight())
                lo, hi = stats.getMinValue(), stats.getMaxValue()
                out.setdefault(name, {})[column] = [
                    None if lo is None else _plain(lo.get("value")),
                    None if hi is None else _plain(hi.get("value")),
                    stats.getNullCount(),
                    stats.getValueCount(),
                ]
    finally:
        md.close()
    return out


def bloom_filters(path: str, files: list) -> dict:
    """Java's view of the bloom_filters partition (HoodieTableMetadata.getBloomFilters) for `files`
    ([[partition, file name], ...]): {"<partition>/<file>": the filter serialised as in a footer}."""
    md = _table_metadata(_meta_client(path), metadata=True)
    try:
        found = md.getBloomFilters(_file_pairs(files))
        out = {}
        for entry in found.entrySet().toArray():
            key = entry.getKey()
            name = f"{key.getLeft()}/{key.getRight()}" if key.getLeft() else str(key.getRight())
            out[name] = str(entry.getValue().serializeToString())
        return out
    finally:
        md.close()


def _plain(value):
    """A Java value py4j did not convert (Utf8, ByteBuffer, BigDecimal) as a plain string."""
    return value if isinstance(value, (int, float, str, bool)) or value is None else str(value)


def storage_listing(path: str) -> dict:
    """The same listing from storage (FileSystemBackedTableMetadata, what Java uses with the MDT
    off): {"partitions": {partition: [[file name, size], ...] sorted}}; every file in the partition
    folder, the partition metadata file and files of unfinished writes included."""
    md = _table_metadata(_meta_client(path), metadata=False)
    try:
        return {"partitions": _listing(md, path)}
    finally:
        md.close()


def file_slices_via_metadata(path: str, partitions: list | None = None, metadata: bool = True) -> dict:
    """The latest file slices as a Java writer sees them: FileSystemViewManager's in-memory view
    with the MDT enabled (HoodieMetadataFileSystemView in 0.x, a HoodieTableFileSystemView over
    HoodieBackedTableMetadata in 1.x), or with metadata=False the listing-based view the same
    factory builds without it.  partition -> sorted [[file id, base instant, base file or None,
    base file size or None, [[log file, size], ...]], ...]; all partitions when `partitions` is None
    (from the same metadata)."""
    meta = _meta_client(path)
    if partitions is None:
        md = _table_metadata(meta, metadata=metadata)
        try:
            partitions = sorted(str(p) for p in md.getAllPartitionPaths().toArray())
        finally:
            md.close()
    view = _file_system_view(meta, metadata)
    try:
        return {part: _slices(view, part) for part in partitions}
    finally:
        view.close()


def metadata_timeline(path: str) -> list:
    """The MDT's own active timeline, completed and pending: [[time, action, state], ...] in time
    order (an instant with suffix 010, 011, ... is an MDT (re)initialisation of a partition)."""
    mdt = SPARK._jvm.org.apache.hudi.metadata.HoodieTableMetadata.getMetadataTableBasePath(path)
    tl = _meta_client(mdt).getActiveTimeline()
    return [[_instant_time(i), i.getAction(), i.getState().name()] for i in tl.getInstants().toArray()]


def validate_metadata(path: str) -> dict:
    """The checks of Hudi's HoodieMetadataTableValidator (hudi-utilities; not in the Spark bundles,
    and not on the Maven repository this machine reaches) done here through the bundle's classes:
    * partitions: MDT partition list == storage's;
    * files: per partition, the MDT's files == storage's by name and size (storage without the
      partition metadata file and without base files of instants not completed on the data timeline);
    * latest file slices and latest base files: the MDT-backed view == the listing-based view.
    {"ok": bool, "errors": [str, ...], "checked": {"partitions": n, "files": n, "slices": n},
    "mdt_partitions": the MDT partitions hoodie.properties lists (record_index: validate_record_index
    applies too)}."""
    meta = _meta_client(path)
    active = meta.getActiveTimeline()
    completed = {_instant_time(i) for i in active.filterCompletedInstants().getInstants().toArray()}
    # archival keeps cleans longer than commits: the commits timeline says where history starts
    first = active.getCommitsTimeline().firstInstant()
    completed_or_archived = (completed, _instant_time(first.get()) if first.isPresent() else None)
    errors = []
    listing = metadata_listing(path)
    mdt = listing["partitions"]
    fs = storage_listing(path)["partitions"]
    if sorted(mdt) != sorted(fs):
        errors.append(f"partitions: MDT {sorted(mdt)} != storage {sorted(fs)}")
    n_files = 0
    for part in sorted(set(mdt) | set(fs)):
        want = {f: size for f, size in fs.get(part, []) if _committed_data_file(f, *completed_or_archived)}
        got = dict(mdt.get(part, []))
        n_files += len(got)
        for f in sorted(set(want) - set(got)):
            errors.append(f"files {part!r}: {f} ({want[f]} bytes) in storage, not in the MDT")
        for f in sorted(set(got) - set(want)):
            errors.append(f"files {part!r}: {f} ({got[f]} bytes) in the MDT, not in storage")
        for f in sorted(set(got) & set(want)):
            if got[f] != want[f]:
                errors.append(f"files {part!r}: {f} is {got[f]} bytes in the MDT, {want[f]} in storage")
    parts = sorted(set(mdt) | set(fs))
    via_mdt = file_slices_via_metadata(path, parts, metadata=True)
    via_fs = file_slices_via_metadata(path, parts, metadata=False)
    n_slices = 0
    for part in parts:
        n_slices += len(via_mdt[part])
        if via_mdt[part] != via_fs[part]:
            errors.append(
                f"latest file slices {part!r}: MDT view {via_mdt[part]} != storage view {via_fs[part]}"
            )
        base_mdt = [r[2] for r in via_mdt[part] if r[2]]
        base_fs = [r[2] for r in via_fs[part] if r[2]]
        if base_mdt != base_fs:
            errors.append(f"latest base files {part!r}: MDT view {base_mdt} != storage view {base_fs}")
    return {
        "ok": not errors,
        "errors": errors,
        "checked": {"partitions": len(parts), "files": n_files, "slices": n_slices},
        "mdt_partitions": listing["mdt_partitions"],
    }


RECORD_INDEX_ERRORS = 40  # findings listed per check; the count says how many there were


def validate_record_index(path: str) -> dict:
    """The record-index checks of Hudi's HoodieMetadataTableValidator (validateRecordIndexCount and
    validateRecordIndexContent; docs/hudi/metadata-table-oracle.md#the-record-index-check), done
    through the bundle's classes:
    * the live keys: `_hoodie_record_key`, `_hoodie_partition_path` and the file id of
      `_hoodie_file_name` of Java's snapshot read as of the latest completed commit, compaction or
      replacecommit, files listed from storage (metadata off: the data side must not come from the
      table under test);
    * every live key looked up through Java's metadata reader (readRecordIndex in 0.x,
      readRecordIndexLocationsWithKeys in 1.x, what its RECORD_INDEX tagging calls): a key the
      index lacks, or places in another partition or file group, is a finding;
    * every record-index entry, read through the same reader (a scan of the whole partition): an
      entry whose key is not live is a finding, and the entries must be as many as the live keys
      (those whose instant reads as after that commit are counted in `after_latest`, not set aside
      as the validator does: see below);
    * a key live twice is a finding (the index holds one location per key).
    {"ok", "errors": [...], "checked": {"keys", "index_entries", "after_latest"}}.  Fails when
    hoodie.properties lists no record_index (nothing to validate is not a pass)."""
    jvm = SPARK._jvm
    meta = _meta_client(path)
    rli = jvm.org.apache.hudi.metadata.MetadataPartitionType.RECORD_INDEX
    if not meta.getTableConfig().isMetadataPartitionAvailable(rli):
        raise RuntimeError(f"{path}: hoodie.properties lists no record_index metadata partition")
    last = meta.getActiveTimeline().getCommitsAndCompactionTimeline().filterCompletedInstants().lastInstant()
    if not last.isPresent():
        raise RuntimeError(f"{path}: no completed commit to validate the record index at")
    latest = _instant_time(last.get())
    live: dict[str, tuple[str, str]] = {}
    errors: list[str] = []
    twice = []
    rows = (
        SPARK.read.format("hudi").option("as.of.instant", latest).option("hoodie.metadata.enable", "false")
        .load(path).select("_hoodie_record_key", "_hoodie_partition_path", "_hoodie_file_name").collect()
    )  # fmt: skip
    for key, part, name in rows:
        where = (part, name.split("_", 1)[0])  # FSUtils.getFileId: the file id precedes the first "_"
        if key in live:
            twice.append(f"record index: key {key!r} is live twice, in {live[key]} and {where}")
        live[key] = where
    errors += twice[:RECORD_INDEX_ERRORS]
    md = _table_metadata(meta, metadata=True)
    try:
        found = _record_index_lookup(md, sorted(live))
        scanned = _record_index_entries(md)
    finally:
        md.close()
    wrong = []
    for key, want in sorted(live.items()):
        got = found.get(key)
        if got is None:
            wrong.append(f"record index: live key {key!r} at {want} is not in the record index")
        elif got != want:
            wrong.append(f"record index: key {key!r} is at {want}, the record index says {got}")
    errors += wrong[:RECORD_INDEX_ERRORS]
    # The validator sets aside entries of instants after the latest commit (a commit racing its two
    # reads). Not here: nothing writes during a test's check, Java's reader already skips blocks of
    # uncompleted instants, and an entry's instant is epoch ms that both Hudi versions turn from and
    # back into a time string in the JVM's default zone, not the table's: an entry a JVM west of this
    # one wrote reads as later than its commit (docs/hudi/metadata-table-oracle.md#the-record-index-check).
    # Counted, for the record, in `after_latest`.
    entries, after_latest = {}, 0
    for key, (part, file_id, instant) in scanned.items():
        after_latest += instant > latest  # same-length time strings
        entries[key] = (part, file_id)
        if key in found and found[key] != (part, file_id):  # Java's two readers of one index
            errors.append(
                f"record index: key {key!r}: look-up says {found[key]}, scan says {(part, file_id)}"
            )
    stale = [
        f"record index: key {k!r} at {entries[k]} is in the record index, not live"
        for k in sorted(set(entries) - set(live))
    ]
    errors += stale[:RECORD_INDEX_ERRORS]
    if len(entries) != len(rows):
        errors.append(f"record index count: {len(entries)} entries, {len(rows)} keys in the data table")
    if max(len(twice), len(wrong), len(stale)) > RECORD_INDEX_ERRORS:
        errors.append(
            f"record index: {len(twice)} keys live twice, {len(wrong)} live keys not indexed where they "
            f"are, {len(stale)} entries not live (first {RECORD_INDEX_ERRORS} of each listed)"
        )
    return {
        "ok": not errors,
        "errors": errors,
        "checked": {"keys": len(live), "index_entries": len(entries), "after_latest": after_latest},
    }


def stop() -> None:
    SPARK.stop()
    sys.exit(0)


OPS = {
    f.__name__: f
    for f in (
        version,
        write,
        stream,
        read,
        sql,
        query,
        catalog_table,
        timeline,
        commits,
        file_slices,
        properties,
        archived_timeline,
        clean_details,
        savepoints,
        restores,
        metadata_listing,
        read_filtered,
        column_stats,
        bloom_filters,
        storage_listing,
        file_slices_via_metadata,
        metadata_timeline,
        validate_metadata,
        validate_record_index,
        stop,
    )
}


# -- Java API helpers (0.15 and 1.x differ in a few names) ------------------------------------------
def _hudi_version() -> str:
    pkg = SPARK._jvm.org.apache.hudi.common.table.HoodieTableMetaClient._java_lang_class.getPackage()
    return str(pkg.getImplementationVersion())


def _meta_client(path: str):
    jvm = SPARK._jvm
    hadoop_conf = SPARK._jsc.hadoopConfiguration()
    builder = jvm.org.apache.hudi.common.table.HoodieTableMetaClient.builder().setBasePath(path)
    try:  # 0.15+: a StorageConfiguration wraps the Hadoop one
        conf = jvm.org.apache.hudi.hadoop.fs.HadoopFSUtils.getStorageConfWithCopy(hadoop_conf)
    except Exception:  # noqa: BLE001 - 0.14: the Hadoop configuration itself
        conf = hadoop_conf
    return builder.setConf(conf).build()


def _engine_context(meta):
    return SPARK._jvm.org.apache.hudi.common.engine.HoodieLocalEngineContext(meta.getStorageConf())


def _metadata_config(metadata: bool):
    return SPARK._jvm.org.apache.hudi.common.config.HoodieMetadataConfig.newBuilder().enable(metadata).build()


def _table_metadata(meta, metadata: bool):
    """HoodieBackedTableMetadata (same constructor in 0.15 and 1.x) or FileSystemBackedTableMetadata
    (0.15 takes an assumeDatePartitioning flag, 1.x does not)."""
    jvm = SPARK._jvm
    ctx, storage, base = _engine_context(meta), meta.getStorage(), str(meta.getBasePath())
    if metadata:
        return jvm.org.apache.hudi.metadata.HoodieBackedTableMetadata(
            ctx, storage, _metadata_config(True), base
        )
    cls = jvm.org.apache.hudi.metadata.FileSystemBackedTableMetadata
    try:  # 1.x
        return cls(ctx, storage, base)
    except Exception:  # noqa: BLE001 - 0.15: (context, storage, base path, assumeDatePartitioning)
        return cls(ctx, storage, base, False)


def _listing(md, path: str) -> dict:
    storage_path = SPARK._jvm.org.apache.hudi.storage.StoragePath
    out = {}
    for part in sorted(str(p) for p in md.getAllPartitionPaths().toArray()):
        where = storage_path(path, part) if part else storage_path(path)
        files = md.getAllFilesInPartition(where).toArray()
        out[part] = sorted([str(f.getPath().getName()), int(f.getLength())] for f in files)
    return out


def _file_system_view(meta, metadata: bool):
    """The in-memory view a Java writer builds (FileSystemViewManager.createInMemoryFileSystemView,
    same signature in 0.15 and 1.x) over the completed and pending-compaction instants."""
    return SPARK._jvm.org.apache.hudi.common.table.view.FileSystemViewManager.createInMemoryFileSystemView(
        _engine_context(meta), meta, _metadata_config(metadata)
    )


def _slices(view, part: str) -> list:
    rows = []
    for fs in view.getLatestFileSlices(part).toArray():
        base = fs.getBaseFile()
        b = base.get() if base.isPresent() else None
        logs = sorted([str(lf.getFileName()), int(lf.getFileSize())] for lf in fs.getLogFiles().toArray())
        rows.append([str(fs.getFileId()), str(fs.getBaseInstantTime()), str(b.getFileName()) if b else None,
                     int(b.getFileSize()) if b else None, logs])  # fmt: skip
    return sorted(rows, key=lambda r: (r[0], r[1]))


def _record_index_lookup(md, keys: list) -> dict:
    """Java's record-index look-up of `keys` (what its RECORD_INDEX tagging calls): key ->
    (partition, file id) for the keys it finds.  0.x: readRecordIndex(List) -> Map; 1.x:
    readRecordIndexLocationsWithKeys(HoodieData) -> HoodiePairData."""
    jvm = SPARK._jvm
    if _hudi_version().startswith("0."):
        found = md.readRecordIndex(jvm.java.util.ArrayList(keys)).entrySet().toArray()
        pairs = [(e.getKey(), e.getValue()) for e in found]
    else:
        data = jvm.org.apache.hudi.common.data.HoodieListData.eager(jvm.java.util.ArrayList(keys))
        found = md.readRecordIndexLocationsWithKeys(data).collectAsList().toArray()
        pairs = [(p.getKey(), p.getValue()) for p in found]
    return {str(k): (str(loc.getPartitionPath()), str(loc.getFileId())) for k, loc in pairs}


def _record_index_entries(md) -> dict:
    """Every live entry of the record index as Java's metadata reader merges it: key -> (partition,
    file id, instant).  getRecordsByKeyPrefixes with the empty prefix reads every file slice of the
    partition through the same merge and instant filter as a look-up; delete markers are dropped, as
    Java's look-up drops them.  (The validator reads the metadata table as a Spark table instead;
    that read fails in both bundles on tables Java wrote: docs/hudi/metadata-table-oracle.md.)"""
    jvm = SPARK._jvm
    if _hudi_version().startswith("0."):
        prefixes = jvm.java.util.ArrayList([""])
    else:
        keys = jvm.java.util.ArrayList()
        keys.add(jvm.org.apache.hudi.metadata.RecordIndexRawKey(""))
        prefixes = jvm.org.apache.hudi.common.data.HoodieListData.eager(keys)
    out = {}
    for record in md.getRecordsByKeyPrefixes(prefixes, "record_index", False).collectAsList().toArray():
        payload = record.getData()
        if payload.isDeleted():
            continue
        loc = payload.getRecordGlobalLocation()
        key = str(record.getRecordKey())
        if key in out:
            raise RuntimeError(f"Java's record-index scan returned key {key!r} twice")
        out[key] = (str(loc.getPartitionPath()), str(loc.getFileId()), str(loc.getInstantTime()))
    return out


def _committed_data_file(name: str, completed: set, first_active: str | None) -> bool:
    """Whether the MDT should list a file storage holds: not the partition metadata file, not a
    hidden file, not a base file of an instant the data timeline has not completed (its write
    failed or is running; the MDT learns of files only at commit).  An instant before the first
    of the active commits timeline is archived, so completed (as Java's views decide it,
    HoodieTimeline.containsOrBeforeTimelineStarts).  Log files
    carry their base instant, not their own, so they are kept."""
    if name.startswith(PARTITION_METADATA) or (name.startswith(".") and ".log." not in name):
        return False
    if ".log." in name:
        return True
    instant = name.rsplit("_", 1)[-1].split(".", 1)[0]
    return instant in completed or (first_active is not None and instant < first_active)


def _instant_time(inst) -> str:
    for name in ("requestedTime", "getTimestamp"):  # 1.x, 0.x
        if hasattr(inst, name):
            try:
                return str(getattr(inst, name)())
            except Exception:  # noqa: BLE001, S112 - py4j resolves methods lazily
                continue
    raise RuntimeError("no instant time accessor")


def _commit_metadata(meta, tl, inst):
    jvm = SPARK._jvm
    try:  # 1.x: the timeline's layout reads the metadata
        return tl.readCommitMetadata(inst)
    except Exception:  # noqa: BLE001 - 0.x: JSON bytes
        details = tl.getInstantDetails(inst).get()
        return jvm.org.apache.hudi.common.model.HoodieCommitMetadata.fromBytes(
            details, jvm.org.apache.hudi.common.model.HoodieCommitMetadata._java_lang_class
        )


# -- the loop ------------------------------------------------------------------------------------
def _session(
    jar: str, tz: str | None, driver_memory: str, hive_metastore: str | None = None, scratch: str = ""
):
    from pyspark.sql import SparkSession

    java_opts = f"-Duser.timezone={tz}" if tz else ""
    # Java 17 closes java.util.concurrent.locks to reflection; Hudi 0.15's BLOOM index with
    # hoodie.bloom.index.use.metadata broadcasts a file-system view (SparkHoodieBloomIndexHelper) whose
    # ReentrantReadWriteLock Kryo's FieldSerializer must open (InaccessibleObjectException without it)
    java_opts += " --add-opens=java.base/java.util.concurrent.locks=ALL-UNNAMED"
    builder = SparkSession.builder
    if hive_metastore:
        # Spark's Hive support (its built-in Hive 2.3.9 client) on the test metastore; Hudi's
        # HoodieCatalog (below) wraps the Hive session catalog (docs/hudi/hive-sync.md#reading-through-the-catalog)
        builder = (
            builder.config("spark.sql.catalogImplementation", "hive")
            .config("spark.hadoop.hive.metastore.uris", hive_metastore)
            .config("spark.sql.warehouse.dir", os.path.join(scratch, "warehouse"))
            # Hive's session scratch folders in this JVM's own folder, not /tmp/hive (shared)
            .config("spark.hadoop.hive.exec.scratchdir", os.path.join(scratch, "hive-scratch"))
            .config("spark.hadoop.hive.exec.local.scratchdir", os.path.join(scratch, "hive-local"))
            .config("spark.hadoop.hive.downloaded.resources.dir", os.path.join(scratch, "hive-resources"))
        )  # fmt: skip
    return (
        builder.master("local[2]").appName("java-hudi-oracle")
        .config("spark.jars", jar)
        # the bundle on the JVM's own class path too: Avro's SpecificData finds generated classes
        # (HoodieDeleteRecordList of a metadata DELETE block) through the application class loader;
        # with spark.jars alone Java 0.15 failed, now and then, reading the record-index delete
        # blocks of our tables (ClassCastException GenericData$Record -> HoodieDeleteRecordList),
        # which are Java's bytes (tests/unit/format/test_metadata_fixtures.py); with it, never
        .config("spark.driver.extraClassPath", jar)
        .config("spark.serializer", "org.apache.spark.serializer.KryoSerializer")
        .config("spark.kryo.registrator", "org.apache.spark.HoodieSparkKryoRegistrar")
        .config("spark.sql.extensions", "org.apache.spark.sql.hudi.HoodieSparkSessionExtension")
        .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.hudi.catalog.HoodieCatalog")
        .config("spark.driver.extraJavaOptions", java_opts)
        .config("spark.driver.memory", driver_memory)
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )  # fmt: skip


def main() -> None:
    global REPLY, SPARK
    ap = argparse.ArgumentParser()
    ap.add_argument("--jar", required=True)
    ap.add_argument("--timezone", default=None, help="the JVM's default zone (Java stamps instants in it)")
    ap.add_argument("--driver-memory", default="2g")
    ap.add_argument("--hive-metastore", default=None, help="thrift://host:port: Spark's Hive support on it")
    ap.add_argument("--scratch", default="", help="a folder of this server's own (warehouse, Hive scratch)")
    args = ap.parse_args()
    # keep the original stdout for replies; the JVM (started below) inherits fd 1 = stderr
    REPLY = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    if args.timezone:
        os.environ["TZ"] = args.timezone
    SPARK = _session(args.jar, args.timezone, args.driver_memory, args.hive_metastore, args.scratch)
    SPARK.sparkContext.setLogLevel("WARN")
    REPLY.write(json.dumps({"ok": True, "result": version()}) + "\n")
    for line in sys.stdin:
        if not line.strip():
            continue
        req = json.loads(line)
        try:
            result = OPS[req["op"]](**req.get("args", {}))
            reply = {"ok": True, "result": result}
        except SystemExit:
            raise
        except BaseException as e:  # noqa: BLE001 - every failure is the test's answer
            reply = {
                "ok": False,
                "error": f"{type(e).__name__}: {e}"[:4000],
                "trace": traceback.format_exc()[-8000:],
            }
        REPLY.write(json.dumps(reply, default=str) + "\n")


if __name__ == "__main__":
    main()
