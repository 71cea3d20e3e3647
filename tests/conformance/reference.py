"""Apache RocketMQ beside pocketmq: its jars, its servers, and Java drivers built on its client.

Everything fetched or built lands in a cache under `~/.cache/pocketmq-reference/` (override
with `POCKETMQ_REFERENCE_CACHE`), never in the repository, so a second run on the same machine
starts at once. Maven fetches the jars the `tests/interop/java/pom-*.xml` files name; a fetch
that fails fails the test with the command to run by hand, it is never skipped.

`ApacheRocketMQ` starts its NameServer and one broker (small heap, loopback, free ports, a
temporary store) as `pocketmq up` would start ours, and stops them by PID.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pocketmq.common.codes import RequestCode
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.transport import RemotingClient
from pocketmq.testing import free_port, free_port_pair

ROOT = Path(__file__).resolve().parents[2]
JAVA_DIR = ROOT / "tests" / "interop" / "java"
CACHE = Path(
    os.environ.get("POCKETMQ_REFERENCE_CACHE", Path.home() / ".cache" / "pocketmq-reference")
)
FETCH_TIMEOUT_S = 900
BOOT_TIMEOUT_S = 120
SERVER_JVM = ["-Xms256m", "-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"]
CLIENT_JVM = ["-Xms64m", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"]
SHARED_BROKER_CONFIG = {
    # SQL92 selectors are off by default in both.
    "enablePropertyFilter": "true",
    # Check-backs every second, of halves older than 5 s (not every 30 s, of halves older than
    # 6 s): RocketMQ writes its ends of transactions in batches every 3 s, so a shorter age
    # makes it check back transactions that did end.
    "transactionTimeOut": "5000",
    "transactionCheckInterval": "1000",
}
"""Broker settings both servers run with, so that the scenarios' waits stay short."""


class ReferenceUnavailable(RuntimeError):
    """The reference could not be fetched, built or started; the message says how to retry."""


def _digest(*paths: Path) -> str:
    digest = hashlib.sha256()
    for path in paths:
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def fetch_jars(pom: Path) -> Path:
    """The folder of every jar `pom` needs, fetched once with Maven into the cache."""
    target = CACHE / f"{pom.stem}-{_digest(pom)}"
    lib = target / "lib"
    if (target / ".complete").exists():
        return lib
    command = [
        "mvn",
        "-q",
        "-B",
        f"-Dmaven.repo.local={CACHE / 'm2'}",
        "-f",
        str(pom),
        "dependency:copy-dependencies",
        f"-DoutputDirectory={lib}",
    ]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=FETCH_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as exc:
        retry = " ".join(command)
        raise ReferenceUnavailable(f"fetching {pom.name} failed ({exc}); retry: {retry}") from None
    if done.returncode:
        raise ReferenceUnavailable(
            f"fetching {pom.name} failed; retry: {' '.join(command)}\n{done.stdout[-3000:]}"
        )
    (target / ".complete").touch()
    return lib


def java_drivers() -> str:
    """The class path of the drivers on rocketmq-client 4.9.8 (`tests/interop/java/src`)."""
    return _compiled_drivers(JAVA_DIR / "pom-client.xml", JAVA_DIR / "src", "drivers")


def v5_drivers() -> str:
    """The class path of the drivers on the server's jars (`tests/interop/java/v5`): rocketmq-
    client 5.5.0's remoting API and the real mqadmin (rocketmq-tools)."""
    return _compiled_drivers(JAVA_DIR / "pom-server.xml", JAVA_DIR / "v5", "v5-drivers")


def grpc_drivers() -> str:
    """The class path of the gRPC drivers (`tests/interop/java/grpc`) on the official 5.x Java
    client (rocketmq-client-java)."""
    return _compiled_drivers(JAVA_DIR / "pom-grpc.xml", JAVA_DIR / "grpc", "grpc-drivers")


def _compiled_drivers(pom: Path, folder: Path, name: str) -> str:
    """`pom`'s jars and `folder`'s drivers compiled against them, once, as a class path."""
    lib = fetch_jars(pom)
    return f"{lib}/*{os.pathsep}{_compiled(folder, name, pom, classpath=f'{lib}/*')}"


def _compiled(folder: Path, name: str, *inputs: Path, classpath: str = "") -> Path:
    """`folder`'s sources compiled once (on `classpath`) into a folder of the cache, again when
    they or `inputs` change."""
    sources = sorted(folder.glob("*.java"))
    classes = CACHE / f"{name}-{_digest(*inputs, *sources)}"
    if (classes / ".complete").exists():
        return classes
    shutil.rmtree(classes, ignore_errors=True)
    search = ["-cp", classpath] if classpath else []
    command = ["javac", *search, "-d", str(classes), *map(str, sources)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    if done.returncode:
        raise ReferenceUnavailable(
            f"compiling {folder.name}'s drivers failed:\n{done.stderr[-3000:]}"
        )
    (classes / ".complete").touch()
    return classes


def with_launchers(classpath: str) -> str:
    """`classpath` and the launchers of `tests/interop/java/tools`: `AdminOnce`, and
    `QuickShutdowns MAIN ...`, which runs a main whose clients stop without a 3 s wait each."""
    return f"{classpath}{os.pathsep}{_compiled(JAVA_DIR / 'tools', 'tools')}"


def mqadmin_java(classpath: str, *jvm: str) -> list[str]:
    """The command line that runs one mqadmin command with the tools on `classpath` (the
    arguments go after it): `AdminOnce`, which exits once the command returned instead of
    waiting seconds for the client's threads to stop."""
    return ["java", *CLIENT_JVM, *jvm, "-cp", with_launchers(classpath), "AdminOnce"]


def run_java_driver(
    classpath: str,
    main: str,
    args: list[str],
    log_dir: Path,
    timeout_s: float = 180,
    jvm: Sequence[str] = (),
) -> dict[str, Any]:
    """Runs one driver (`jvm`: extra JVM options, e.g. `-Dtls.enable=true`); returns the JSON
    transcript it prints as its last stdout line."""
    command = [
        "java",
        *CLIENT_JVM,
        *jvm,
        f"-Drocketmq.client.logRoot={log_dir}",
        # Broadcasting consumers keep their offsets here: one folder per run, so a run against
        # one server does not resume from offsets another run stored.
        f"-Drocketmq.client.localOffsetStoreDir={log_dir / 'offsets'}",
        "-cp",
        classpath,
        main,
        *args,
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode or not lines:
        raise AssertionError(
            f"{main} {' '.join(args)} exited {done.returncode}:\n{done.stderr[-3000:]}"
        )
    transcript: dict[str, Any] = json.loads(lines[-1])
    return transcript


def wait_until_ready(
    port: int, process: subprocess.Popen[bytes], log: Path, line: str | None
) -> None:
    """Until `port` accepts connections and, when given, `line` is in the log (a broker's port
    opens before it has registered with the NameServer)."""
    deadline = time.monotonic() + BOOT_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise ReferenceUnavailable(f"it exited with {process.returncode}: {log_tail(log)}")
        with socket.socket() as probe:
            probe.settimeout(0.5)
            if probe.connect_ex(("127.0.0.1", port)) == 0 and (
                line is None or line in log.read_text(errors="replace")
            ):
                return
        time.sleep(0.2)
    raise ReferenceUnavailable(
        f"not ready on port {port} within {BOOT_TIMEOUT_S} s: {log_tail(log)}"
    )


LOGBACK_TO_STDOUT = """<configuration>
  <appender name="STDOUT" class="ch.qos.logback.core.ConsoleAppender">
    <encoder><pattern>%d{HH:mm:ss.SSS} %-5level %logger{20} - %msg%n</pattern></encoder>
  </appender>
  <root level="INFO"><appender-ref ref="STDOUT"/></root>
</configuration>
"""


def log_tail(log: Path) -> str:
    lines = log.read_text(errors="replace").splitlines()
    return "\n".join(line for line in lines if "|-" not in line)[-2000:]


class ApacheRocketMQ:
    """Apache RocketMQ's NameServer and one master broker on loopback, in `work`."""

    def __init__(
        self,
        work: Path,
        *,
        pom: str = "pom-server.xml",
        broker_settings: dict[str, str] | None = None,
        jvm: list[str] | None = None,
    ) -> None:
        """`pom`: which release (`pom-server-4.xml`: 4.9.7); `broker_settings`: more keys
        for the broker's file; `jvm`: the servers' JVM options (by default small and quick to
        start, for tests; a benchmark gives what RocketMQ's own scripts would)."""
        self.work = work
        self.jvm = jvm or SERVER_JVM
        self.lib = fetch_jars(JAVA_DIR / pom)
        self.broker_settings = broker_settings or {}
        self.namesrv_port = free_port()
        self.broker_port = free_port_pair()  # and its HA port, listenPort + 1
        self.processes: list[subprocess.Popen[bytes]] = []

    @property
    def namesrv_addr(self) -> str:
        return f"127.0.0.1:{self.namesrv_port}"

    @property
    def broker_addr(self) -> str:
        return f"127.0.0.1:{self.broker_port}"

    @property
    def home(self) -> Path:
        """ROCKETMQ_HOME of both processes (its `conf/plain_acl.yml` is the broker's ACL)."""
        return self.work / "home"

    def start(self) -> None:
        home = self.home
        store = self.work / "store"
        home.mkdir(parents=True, exist_ok=True)
        # RocketMQ 4 reads its logging setup from ROCKETMQ_HOME/conf (5 from its jars).
        (home / "conf").mkdir(exist_ok=True)
        for name in ("logback_namesrv.xml", "logback_broker.xml"):
            (home / "conf" / name).write_text(LOGBACK_TO_STDOUT)
        (self.work / "namesrv.properties").write_text(f"listenPort={self.namesrv_port}\n")
        (self.work / "broker.properties").write_text(
            "\n".join(
                [
                    "brokerClusterName=DefaultCluster",
                    "brokerName=broker-a",
                    "brokerId=0",
                    f"namesrvAddr={self.namesrv_addr}",
                    f"listenPort={self.broker_port}",
                    "brokerIP1=127.0.0.1",
                    f"storePathRootDir={store}",
                    f"storePathCommitLog={store / 'commitlog'}",
                    "mappedFileSizeCommitLog=67108864",
                    "autoCreateTopicEnable=true",
                    "autoCreateSubscriptionGroup=true",
                    *(f"{key}={value}" for key, value in SHARED_BROKER_CONFIG.items()),
                    *(f"{key}={value}" for key, value in self.broker_settings.items()),
                ]
            )
            + "\n"
        )
        self._start("namesrv", "org.apache.rocketmq.namesrv.NamesrvStartup", self.namesrv_port)
        self._start(
            "broker", "org.apache.rocketmq.broker.BrokerStartup", self.broker_port, "boot success"
        )
        try:
            asyncio.run(self._wait_registered())
        except ReferenceUnavailable:
            self.stop()
            raise

    async def _wait_registered(self) -> None:
        """Until the NameServer routes to the broker: "boot success" is printed before the
        broker's first registration has reached it."""
        request = RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO, {})
        client = RemotingClient()
        try:
            deadline = time.monotonic() + BOOT_TIMEOUT_S
            while time.monotonic() < deadline:
                answer = await client.invoke(self.namesrv_addr, request, 5)
                if f"127.0.0.1:{self.broker_port}".encode() in answer.body:
                    return
                await asyncio.sleep(0.2)
        finally:
            await client.close()
        raise ReferenceUnavailable(
            f"Apache RocketMQ's broker did not register within {BOOT_TIMEOUT_S} s: "
            f"{log_tail(self.work / 'broker.log')}"
        )

    def start_proxy(self) -> str:
        """Starts RocketMQ's 5.x proxy (cluster mode) in front of the NameServer; its gRPC
        address. TLS stays permissive, RocketMQ's default."""
        self.proxy_port = free_port()
        config = {
            "rocketMQClusterName": "DefaultCluster",
            "namesrvAddr": self.namesrv_addr,
            "grpcServerPort": self.proxy_port,
            "remotingListenPort": free_port(),
            "proxyMode": "cluster",
        }
        (self.work / "rmq-proxy.json").write_text(json.dumps(config))
        self._start(
            "proxy",
            "org.apache.rocketmq.proxy.ProxyStartup",
            self.proxy_port,
            arguments=["-pc", str(self.work / "rmq-proxy.json")],
        )
        return f"127.0.0.1:{self.proxy_port}"

    def _start(
        self,
        name: str,
        main: str,
        port: int,
        ready_line: str | None = None,
        *,
        arguments: list[str] | None = None,
    ) -> None:
        log = self.work / f"{name}.log"
        env = dict(os.environ, ROCKETMQ_HOME=str(self.work / "home"))
        command = [
            "java",
            *self.jvm,
            f"-Duser.home={self.work / 'home'}",
            "-cp",
            f"{self.lib}/*",
            main,
            *(
                arguments
                if arguments is not None
                else ["-c", str(self.work / f"{name}.properties")]
            ),
        ]
        with log.open("wb") as output:
            process = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT, env=env)
        self.processes.append(process)
        try:
            wait_until_ready(port, process, log, ready_line)
        except ReferenceUnavailable as exc:
            self.stop()
            raise ReferenceUnavailable(f"Apache RocketMQ's {name} did not start: {exc}") from None

    def stop(self) -> None:
        """Kills both: the store is a throwaway, and RocketMQ's orderly shutdown takes 15 s."""
        for process in reversed(self.processes):
            if process.poll() is None:
                process.kill()
            process.wait(30)
        self.processes.clear()
