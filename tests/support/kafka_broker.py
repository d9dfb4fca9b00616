"""A real Apache Kafka broker for the tests: one KRaft node (broker and controller) on 127.0.0.1.

The jars come from Maven Central through set-up (tests/support/kafka_setup.py, run by
`./run.sh test`); the broker runs as `java -cp <closure> kafka.Kafka server.properties` after its
storage is formatted (`kafka.tools.StorageTool format`, what `kafka-storage.sh format` runs), as
Kafka's own scripts do. `restart()` stops it (SIGTERM: a controlled shutdown) and starts it again
on the same ports and log folder, so clients that knew it find it again. Its log (broker.log, with
each start's command) stays in the pytest temp folder; a failed start says where and shows its tail.

Test messages are produced and topics created with confluent-kafka (librdkafka in manylinux
wheels, Confluent's client: docs/spark/kafka.md#the-python-client).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Iterable
from pathlib import Path

import pytest

from tests.support import kafka_setup

START_TIMEOUT_S = 90.0

LOG4J2 = """status = warn
appender.out.type = Console
appender.out.name = out
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.out.ref = out
logger.server.name = kafka.server
logger.server.level = INFO
logger.controller.name = org.apache.kafka.controller
logger.controller.level = INFO
"""


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory):
    """One broker for the test session (its folder, with broker.log, stays in pytest's temp folder);
    a test that needs its own topics names them itself. tests/spark/conftest.py offers it."""
    if os.environ.get("HOODIE_INTEROP") == "0":
        pytest.skip("HOODIE_INTEROP=0: the tiers fetched from Maven Central are switched off")
    missing = kafka_setup.missing()
    if missing:
        pytest.fail(f"Kafka tests not set up ({missing}): run the tests with ./run.sh test", pytrace=False)
    broker = KafkaBroker(tmp_path_factory.mktemp("kafka"))
    broker.start()
    yield broker
    broker.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class KafkaBroker:
    """One KRaft node in `workdir`: `start()`, `stop()`, `restart()`, `close()`; `bootstrap` is its
    address; `create_topic` and `produce` through confluent-kafka."""

    def __init__(self, workdir: Path, classpath: str | None = None) -> None:
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        if classpath is None:
            classpath = kafka_setup.broker_classpath_file().read_text().strip()
        self.classpath = classpath
        self.port, self.controller_port = free_port(), free_port()
        self.bootstrap = f"127.0.0.1:{self.port}"
        self.log_dir = self.workdir / "data"
        self.log_path = self.workdir / "broker.log"
        self.config = self.workdir / "server.properties"
        self.process: subprocess.Popen[bytes] | None = None
        self.start_times: list[float] = []  # seconds from launch until the broker answered, per start
        self._write_config()
        self._format()

    def _write_config(self) -> None:
        props = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@127.0.0.1:{self.controller_port}",
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(self.log_dir),
            "num.partitions": "1",
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            # a small broker: a few threads, a test's messages flushed by the OS as usual
            "num.network.threads": "2",
            "num.io.threads": "2",
            "auto.create.topics.enable": "false",
        }
        self.config.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        (self.workdir / "log4j2.properties").write_text(LOG4J2)

    def _java(self, main: str, *args: str) -> list[str]:
        return ["java", "-Xmx512m", "-XX:+UseSerialGC", "-Djava.awt.headless=true",
                f"-Dlog4j2.configurationFile={self.workdir / 'log4j2.properties'}",
                "-cp", self.classpath, main, *args]  # fmt: skip

    def _format(self) -> None:
        """`kafka-storage.sh format --standalone`-like: a cluster id and node 1's meta.properties."""
        cluster_id = uuid.uuid4().hex[:22]  # any 22 characters serve; Kafka's own ids are base64 UUIDs
        cmd = self._java("kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", str(self.config))
        with open(self.log_path, "ab") as log:
            log.write(f"$ {' '.join(cmd[-6:])}\n".encode())
            log.flush()
            rc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, check=False).returncode
        if rc != 0:
            raise RuntimeError(f"formatting the Kafka storage failed (exit {rc}):\n{self.log_tail()}")

    def log_tail(self, lines: int = 40) -> str:
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        return f"--- {self.log_path} (last {lines} lines) ---\n" + "\n".join(text.splitlines()[-lines:])

    def start(self) -> float:
        """Start the broker and wait until it answers; returns the seconds that took."""
        if self.process is not None and self.process.poll() is None:
            return 0.0
        t0 = time.monotonic()
        with open(self.log_path, "ab") as log:
            log.write(f"\n$ kafka.Kafka {self.config}  # start {len(self.start_times) + 1}\n".encode())
            log.flush()
            self.process = subprocess.Popen(
                self._java("kafka.Kafka", str(self.config)), stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip
        self._wait_ready(t0)
        took = time.monotonic() - t0
        self.start_times.append(took)
        return took

    def _wait_ready(self, t0: float) -> None:
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 0})
        while True:
            assert self.process is not None
            if self.process.poll() is not None:
                raise RuntimeError(f"the Kafka broker exited ({self.process.returncode}):\n{self.log_tail()}")
            if time.monotonic() - t0 > START_TIMEOUT_S:
                self.stop()
                raise RuntimeError(
                    f"the Kafka broker did not answer in {START_TIMEOUT_S:.0f} s:\n{self.log_tail()}"
                )
            try:
                md = admin.list_topics(timeout=1)
                if md.brokers:
                    return
            except Exception:  # noqa: BLE001 - not up yet: KafkaException until it listens
                time.sleep(0.2)

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM (a controlled shutdown, as kafka-server-stop.sh), SIGKILL after `timeout`."""
        p, self.process = self.process, None
        if p is None or p.poll() is not None:
            return
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()

    def restart(self) -> float:
        self.stop()
        return self.start()

    close = stop

    # ----------------------------------------------------------------------------------- clients
    def create_topic(self, name: str, partitions: int) -> None:
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        for fut in admin.create_topics(
            [NewTopic(name, num_partitions=partitions, replication_factor=1)]
        ).values():
            fut.result(30)
        # wait until every partition has a leader: a producer's first send would otherwise be refused
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            t = admin.list_topics(name, timeout=5).topics.get(name)
            ready = t is not None and t.error is None and len(t.partitions) == partitions
            if ready and all(p.leader >= 0 for p in t.partitions.values()):
                return
            time.sleep(0.1)
        raise RuntimeError(f"topic {name}: {partitions} partitions without leaders after 30 s")

    def produce(
        self, topic: str, messages: Iterable[tuple[bytes | str | None, bytes | str, int | None]]
    ) -> list[tuple[int, int]]:
        """Send (key, value, partition or None) messages, idempotently and acknowledged by the broker;
        returns each message's (partition, offset) in sending order."""
        from confluent_kafka import KafkaException, Producer

        producer = Producer({"bootstrap.servers": self.bootstrap, "enable.idempotence": True,
                             "linger.ms": 5, "log_level": 0})  # fmt: skip
        sent: list[tuple[int, int] | None] = []
        errors: list[str] = []

        def delivered(i: int):
            def cb(err, msg) -> None:
                if err is not None:
                    errors.append(str(err))
                else:
                    sent[i] = (msg.partition(), msg.offset())

            return cb

        for i, (key, value, partition) in enumerate(messages):
            sent.append(None)
            kw = {} if partition is None else {"partition": partition}
            while True:
                try:
                    producer.produce(topic, value=value, key=key, on_delivery=delivered(i), **kw)
                    break
                except BufferError:
                    producer.poll(0.1)
            producer.poll(0)
        left = producer.flush(60)
        if left or errors:
            raise KafkaException(f"{left} messages not delivered; errors: {errors[:5]}")
        return [s for s in sent if s is not None]
