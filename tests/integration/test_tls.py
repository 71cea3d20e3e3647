"""TLS on real pocketmq processes: permissive mode (RocketMQ's default) serves TLS and plaintext
clients on one port; enforcing mode refuses plaintext with a clear error while TLS clients,
`pocketmq admin --tls` and the broker's own registration work; a master that requires client
certificates replicates to a slave that presents one signed by the trusted CA, and not to one
without."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from pocketmq.client import Admin, Message, Producer, SendResult, SendStatus
from pocketmq.client.errors import RocketMQError
from pocketmq.remoting.tls import TlsConfig
from pocketmq.testing import ServerProcess, start_up_process, wait_until
from tests.integration.certificates import Authority
from tests.integration.dledger import running_group
from tests.integration.replication import BrokerGroup

TOPIC = "TlsTopic"


def up(tmp_path: Path, **settings: str) -> ServerProcess:
    config = tmp_path / "up.properties"
    config.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
    return start_up_process(tmp_path / "data", tmp_path / "up.log", "-c", str(config))


def admin(namesrv: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pocketmq.cli.main", "admin", *args, "-n", namesrv],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def send_one(namesrv: str, tls: bool | TlsConfig, body: bytes) -> SendResult:
    with Producer("tls-producer", namesrv=namesrv, tls=tls, send_timeout_s=10) as producer:
        result = producer.send(Message(TOPIC, body))
    assert result.status is SendStatus.SEND_OK
    return result


def test_permissive_mode_serves_tls_and_plaintext_clients_on_one_port(tmp_path: Path) -> None:
    server = up(tmp_path)
    try:
        send_one(server.address, False, b"plain")
        send_one(server.address, True, b"encrypted")
        with Admin([server.address], tls=True) as tls_admin:
            bodies = {m.message.body for m in tls_admin.consume(TOPIC, count=10)}
        assert bodies == {b"plain", b"encrypted"}
    finally:
        assert server.stop() == 0


def test_enforcing_mode_refuses_plaintext_and_serves_tls(tmp_path: Path) -> None:
    # tls.enable: the broker's own connection to its NameServer must speak TLS too.
    server = up(tmp_path, **{"tls.server.mode": "enforcing", "tls.enable": "true"})
    try:
        send_one(server.address, True, b"over tls")
        plain = Producer("plain", namesrv=server.address, send_timeout_s=3)
        with pytest.raises(RocketMQError), plain:
            plain.send(Message(TOPIC, b"plaintext"))
        listed = admin(server.address, "clusterList", "--tls")
        assert listed.returncode == 0, listed.stderr
        assert "DefaultCluster" in listed.stdout
        refused = admin(server.address, "clusterList", "--timeout", "3")
        assert refused.returncode == 1
        assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr
        assert "Traceback" not in refused.stderr
    finally:
        assert server.stop() == 0
    assert "tls enforcing" in (tmp_path / "up.log").read_text()


def test_a_certificate_the_process_cannot_load_stops_it_with_one_line(tmp_path: Path) -> None:
    config = tmp_path / "broker.properties"
    config.write_text(
        "tls.server.mode=enforcing\n"
        f"tls.server.certPath={tmp_path / 'missing.pem'}\n"
        f"tls.server.keyPath={tmp_path / 'missing.key'}\n"
    )
    completed = subprocess.run(
        [sys.executable, "-m", "pocketmq.cli.main", "namesrv", "--port", "0", "-c", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert completed.returncode == 2
    lines = completed.stderr.strip().splitlines()
    assert len(lines) == 1, completed.stderr
    assert "missing.pem" in lines[0]


# -- mutual TLS between a master and its slave ------------------------------------------------


@pytest.fixture
def group(tmp_path: Path) -> Iterator[BrokerGroup]:
    brokers = BrokerGroup(tmp_path)
    try:
        yield brokers
    finally:
        brokers.close()


def test_a_master_requiring_client_certificates_replicates_only_to_a_slave_that_has_one(
    group: BrokerGroup, tmp_path: Path
) -> None:
    authority = Authority(tmp_path)
    server_cert, server_key = authority.issue("broker")
    client_cert, client_key = authority.issue("replica")
    mutual = {
        "tls.server.mode": "enforcing",
        "tls.server.need.client.auth": "require",
        "tls.server.certPath": str(server_cert),
        "tls.server.keyPath": str(server_key),
        "tls.server.trustCertPath": str(authority.path),
        "tls.enable": "true",  # the NameServer's certificate is its own: not checked
    }
    with_certificate = {
        **mutual,
        "tls.client.certPath": str(client_cert),
        "tls.client.keyPath": str(client_key),
    }
    group.add("master", "broker-a", 0, "SYNC_MASTER", **with_certificate)
    group.add("slave", "broker-a", 1, "SLAVE", **with_certificate)
    group.add("stranger", "broker-a", 2, "SLAVE", **mutual)  # no client certificate
    master = group.start("master")
    slave = group.start("slave")
    stranger = group.start("stranger")
    client = TlsConfig(
        client_cert_path=str(client_cert),
        client_key_path=str(client_key),
    )
    queue = send_one(group.namesrv_addr, client, b"replicated").queue
    with Admin([group.namesrv_addr], tls=client) as tls_admin:
        wait_until(
            lambda: bool(tls_admin.pull(slave.address, TOPIC, queue.queue_id, 0, 32).messages),
            "the slave with a certificate holding the message",
            timeout_s=30,
        )
        plain = Admin([group.namesrv_addr], tls=True)  # TLS, but no client certificate
        with plain, pytest.raises(RocketMQError):
            plain.pull(master.address, TOPIC, queue.queue_id, 0, 32)
    assert stranger.process is not None
    stranger_log = stranger.process.log_path
    wait_until(
        lambda: "replication from master" in stranger_log.read_text(errors="replace"),
        "the slave without a certificate saying why it cannot replicate",
        timeout_s=30,
    )


def test_dledger_replicas_elect_and_replicate_with_tls_enforced(tmp_path: Path) -> None:
    """Raft between the replicas, their registration and the clients, all over TLS: every
    listener refuses plaintext, every replica connects with `tls.enable`."""
    tls = {"tls.server.mode": "enforcing", "tls.enable": "true"}
    with running_group(tmp_path, **tls) as group:
        group.admin = Admin([group.namesrv_addr], timeout_s=3.0, tls=True)
        master = group.wait_master(timeout_s=30)
        with Producer("tls-dledger", namesrv=group.namesrv_addr, tls=True) as producer:
            for i in range(5):
                assert (
                    producer.send(Message(TOPIC, f"raft-{i}".encode())).status is SendStatus.SEND_OK
                )
        end = group.wait_converged()
        reference = group.commit_log_bytes(master, end)
        assert all(group.commit_log_bytes(name, end) == reference for name in group.replicas)
    log = "".join(path.read_text(errors="replace") for path in tmp_path.glob("n*.log"))
    assert "tls enforcing" in log
