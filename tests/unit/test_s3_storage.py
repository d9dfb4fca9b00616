"""Tables on S3 (s3://, s3a://, s3n://) through the engine, against the S3 server of the tests
(s3proxy on 127.0.0.1, tests/support/s3_server.py): settings from Hadoop S3A options or the AWS
environment, atomic create-if-absent by conditional PUT, clear errors for bad settings."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa
import pytest

import hoodie_sink
from hoodie_sink.errors import HoodieConfigError, HoodieTableError
from hoodie_sink.table.format.timeline.timeline import Timeline
from hoodie_sink.table.options.write_config import WriteConfig
from hoodie_sink.table.storage import Storage
from hoodie_sink.table.storage_options import StorageOptions
from hoodie_sink.table.write.locking import FileSystemLock
from tests.support.tables import hudi_rs_read, sort_by_key

KEYED = {
    "hoodie.datasource.write.recordkey.field": "id",
    "hoodie.datasource.write.partitionpath.field": "p",
    "hoodie.datasource.write.precombine.field": "ts",
}


def rows(keys, ts):
    return pa.table(
        {
            "id": keys,
            "p": [f"p{len(k) % 2}" for k in keys],
            "ts": [ts] * len(keys),
            "v": [f"{k}@{ts}" for k in keys],
        }
    )


def test_s3a_options_are_parsed_once_and_unknown_ones_are_refused():
    opts = StorageOptions.from_options(
        {"spark.hadoop.fs.s3a.endpoint": "127.0.0.1:9000", "fs.s3a.connection.ssl.enabled": "false",
         "fs.s3a.access.key": "ak", "fs.s3a.secret.key": "sk", "fs.s3a.path.style.access": "true"}
    )  # fmt: skip
    assert opts.endpoint_url() == "http://127.0.0.1:9000"  # Hadoop: a bare host takes its scheme from ssl
    assert "sk" not in repr(opts) and "ak" in repr(opts)
    with pytest.raises(HoodieConfigError, match="'fs.s3a.aws.credentials.provider' is not supported"):
        WriteConfig.from_options({**KEYED, "fs.s3a.aws.credentials.provider": "x"}, path="s3a://b/t")
    with pytest.raises(HoodieConfigError, match="'fs.s3a.path.style.access'='yes' is not a boolean"):
        StorageOptions.from_options({"fs.s3a.path.style.access": "yes"})
    with pytest.raises(HoodieConfigError, match="names no bucket"):
        Storage("s3a:///t").fs  # noqa: B018


@pytest.mark.parametrize("scheme", ["s3", "s3a", "s3n"])
def test_a_table_on_s3_with_s3a_options_is_written_and_read_back(tmp_path, s3, s3_uri, scheme):
    uri = s3_uri(tmp_path / "t", scheme)
    opts = {**KEYED, **s3.options()}
    hoodie_sink.write(rows(["a", "bb", "c"], 1), uri, opts)
    hoodie_sink.write(rows(["bb", "dd"], 2), uri, opts)
    got = sort_by_key(hoodie_sink.read(uri, s3.options()))
    assert got["v"].to_pylist() == ["a@1", "bb@2", "c@1", "dd@2"]
    # the objects are s3proxy's files: hudi-rs reads the same table from local disk
    assert sort_by_key(hudi_rs_read(tmp_path / "t"))["v"].to_pylist() == got["v"].to_pylist()
    cfg = WriteConfig.from_options(opts, path=uri)
    assert len(Timeline.load(cfg.storage()).completed()) == 2


def test_settings_come_from_the_aws_environment_when_no_option_is_given(tmp_path, s3, s3_uri, monkeypatch):
    for k, v in s3.env().items():
        monkeypatch.setenv(k, v)
    uri = s3_uri(tmp_path / "t")
    hoodie_sink.write(rows(["a"], 1), uri, KEYED)
    assert hoodie_sink.read(uri).num_rows == 1
    assert Storage(uri).create_if_absent("claim") and not Storage(uri).create_if_absent("claim")


def test_wrong_credentials_fail_with_an_error_that_names_the_path(tmp_path, s3, s3_uri):
    uri = s3_uri(tmp_path / "t")
    bad = {**s3.options(), "fs.s3a.secret.key": "wrong"}
    with pytest.raises(HoodieTableError, match=f"(?s)Cannot reach the table at {uri}.*ACCESS_DENIED.*fs.s3a"):
        hoodie_sink.write(rows(["a"], 1), uri, {**KEYED, **bad})
    with pytest.raises(HoodieTableError, match="Cannot reach the table"):
        hoodie_sink.read(uri, bad)
    storage = Storage(uri, StorageOptions.from_options(bad))
    with pytest.raises(HoodieTableError, match="Cannot create s3://"):
        storage.create_if_absent("claim")  # an error, never "someone else holds it"
    assert not (tmp_path / "t" / ".hoodie").exists()


class FlakyFileSystem:
    """An S3 file system whose first `failures` reads break as s3proxy's once did."""

    def __init__(self, fs, failures: int, error: str):
        self.fs, self.failures, self.error, self.reads = fs, failures, error, 0

    def open_input_stream(self, path):
        self.reads += 1
        if self.reads <= self.failures:
            raise OSError(self.error)
        return self.fs.open_input_stream(path)

    def __getattr__(self, name):
        return getattr(self.fs, name)


BROKEN_BODY = (
    "AWS Error INTERNAL_FAILURE during GetObject operation: Failed to flush response stream (eof: 0, bad: 1)"
)


@pytest.mark.parametrize(
    ("failures", "error", "reads", "outcome"),
    [
        (2, BROKEN_BODY, 3, None),  # transient: read again, and the content comes back
        (9, BROKEN_BODY, 4, "Cannot reach the table"),  # bounded: 4 attempts, then the error
        (9, "AWS Error ACCESS_DENIED during GetObject operation", 1, "ACCESS_DENIED"),  # a refusal: once
    ],
)
def test_a_read_is_tried_again_after_a_transient_s3_error_and_only_then(
    tmp_path, s3, s3_uri, failures, error, reads, outcome
):
    storage = Storage(s3_uri(tmp_path / "t"), StorageOptions.from_options(s3.options()))
    storage.write_atomic("f", b"content")
    flaky = FlakyFileSystem(storage.fs, failures, error)
    storage._fs = flaky
    if outcome is None:
        assert storage.read_bytes("f") == b"content"
    else:
        with pytest.raises(HoodieTableError, match=outcome):
            storage.read_bytes("f")
    assert flaky.reads == reads


def test_create_if_absent_on_s3_has_exactly_one_winner_under_a_race(tmp_path, s3, s3_uri):
    storage = Storage(s3_uri(tmp_path / "t"), StorageOptions.from_options(s3.options()))
    for race in range(10):
        barrier = threading.Barrier(8)

        def claim(i, race=race, barrier=barrier):
            mine = Storage(storage.base_uri, storage.options)  # concurrent requests: the server decides
            barrier.wait()
            return mine.create_if_absent(f"claims/{race}", f"writer {i}".encode())

        with ThreadPoolExecutor(8) as pool:
            won = [i for i, ok in enumerate(pool.map(claim, range(8))) if ok]
        assert len(won) == 1, f"race {race}: winners {won}"
        assert storage.read_text(f"claims/{race}") == f"writer {won[0]}"


def test_the_file_system_lock_excludes_writers_on_s3(tmp_path, s3, s3_uri):
    uri = s3_uri(tmp_path / "t")
    cfg = WriteConfig.from_options(
        {**KEYED, **s3.options(), "hoodie.write.concurrency.mode": "optimistic_concurrency_control",
         "hoodie.write.lock.provider": "org.apache.hudi.client.transaction.lock.FileSystemBasedLockProvider",
         "hoodie.write.lock.client.num_retries": "2", "hoodie.write.lock.client.wait_time_ms_between_retry": "50"},
        path=uri,
    )  # fmt: skip
    inside: list[int] = []
    overlap: list[int] = []
    errors: list[Exception] = []

    def hold(i):
        lock = FileSystemLock(cfg)
        try:
            lock.acquire()
        except Exception as e:  # noqa: BLE001 - counted below
            errors.append(e)
            return
        inside.append(i)
        time.sleep(0.05)
        overlap.append(len(inside))
        inside.remove(i)
        lock.release()

    threads = [threading.Thread(target=hold, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not [e for e in errors if "Unable to acquire lock" not in str(e)]
    assert overlap and set(overlap) == {1}, "two writers held the lock at once"
    assert not (tmp_path / "t" / ".hoodie" / "lock").exists()  # released


def test_a_completed_instant_on_s3_is_published_once_and_never_overwritten(tmp_path, s3, s3_uri):
    from hoodie_sink.errors import HoodieCommitStateUnknown
    from hoodie_sink.table.format.timeline.instant import COMMIT, COMPLETED, INFLIGHT, Instant
    from hoodie_sink.table.format.timeline.timeline import TimelineStore

    storage = Storage(s3_uri(tmp_path / "t"), StorageOptions.from_options(s3.options()))
    store = TimelineStore(storage)
    inflight = Instant("20260101000000000", COMMIT, INFLIGHT)
    store.complete(inflight, b'{"a": 1}')
    store.complete(inflight, b'{"a": 1}')  # the same publication again (an answer lost): it landed
    with pytest.raises(HoodieCommitStateUnknown):
        store.complete(inflight, b'{"a": 2}')
    assert storage.read_bytes(store.path(inflight.with_state(COMPLETED))) == b'{"a": 1}'


def test_the_test_server_starts_on_another_port_when_its_port_was_taken_and_never_trusts_a_stranger(tmp_path):
    """Test infrastructure (stop 33's CI failure): a port found free was taken by another process
    before s3proxy bound it; the other process accepted connections and every S3 request of the
    worker timed out.  Readiness must be an S3 answer from our server, and a lost bind a retry."""
    import socket

    from tests.support import s3_server

    with socket.socket() as stranger:
        stranger.bind(("127.0.0.1", 0))
        stranger.listen()
        taken = stranger.getsockname()[1]
        with pytest.raises(RuntimeError, match="lost the race"):
            s3_server.start(tmp_path / "b", state_dir=tmp_path, port=taken, timeout_s=30)
        server = s3_server.start(tmp_path / "b", state_dir=tmp_path, timeout_s=30)
    try:
        assert server.endpoint != f"http://127.0.0.1:{taken}"
        assert s3_server._answers(server.endpoint)
    finally:
        server.stop()
