"""`pocketmq up`: a NameServer and one broker in one process, on embedded defaults.

Cluster `DefaultCluster`, broker `broker-a`, data under `./.pocketmq` (or `--data-dir`),
`--namesrv-port` / `--broker-port` to move them (0 picks free ports), `-c broker.properties`
for anything else, the proxy's keys too (for example `flushDiskType=SYNC_FLUSH`,
`tls.server.mode=disabled`). The file's `listenPort`, `brokerName` and `storePathRootDir` are
honoured unless a flag says otherwise; its `namesrvAddr` cannot be (this process runs its own
NameServer), which one warning line says.
Unlike a plain broker, timer messages may be recalled (`recallMessageEnable=true`).
The 5.x gRPC proxy serves in the same process (local mode) on `--proxy-port` (8081; 0 picks a
free port, as it does by default when `--namesrv-port 0` asks for free ports).
`--slaves N` adds N slaves of broker-a in the same process (`--sync` makes the master a
SYNC_MASTER): a local Master/Slave pair. `--dledger N` instead runs broker-a as a DLedger group
of N replicas (n0, n1, ...; broker ports 10 apart, DLedger ports 40911 on, or free ones) and is
ready once one of them leads. One "ready" line gives the addresses; Ctrl-C stops
everything cleanly. A startup problem (a bad setting, a port in use, a data directory that
cannot be written) is one line on stderr and a non-zero exit.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import secrets
from dataclasses import replace
from pathlib import Path
from typing import Any

from pocketmq.broker.config import BrokerConfig, BrokerRole
from pocketmq.broker.server import BrokerConfigError, BrokerServer
from pocketmq.cli.broker import broker_bind_failure
from pocketmq.cli.serving import (
    StartupError,
    apply_config_file,
    bind_failure,
    check_data_dir,
    run_server,
    serve_until_signalled,
    start_metrics,
)
from pocketmq.client.credentials import SessionCredentials
from pocketmq.common.config import ConfigError
from pocketmq.namesrv.server import NamesrvConfig, NamesrvServer
from pocketmq.observability import catalog
from pocketmq.observability.exporter import MetricsExporter, source_for
from pocketmq.observability.metrics_config import ExporterType, MetricsConfig
from pocketmq.observability.registry import MetricsHub, MetricSource
from pocketmq.observability.rpc import RpcLatency
from pocketmq.proxy.config import ProxyConfig, ProxyMode
from pocketmq.proxy.server import ProxyServer
from pocketmq.remoting.tls import TlsConfigError
from pocketmq.runtime.ports import free_port_run
from pocketmq.store.config import MessageStoreConfig

log = logging.getLogger("pocketmq.up")

DATA_DIR_DEFAULT = ".pocketmq"


def register(commands: Any) -> None:
    """Adds `up` to the top-level sub-command set."""
    parser: argparse.ArgumentParser = commands.add_parser(
        "up", help="start a NameServer and a broker in one process (embedded defaults)"
    )
    parser.add_argument(
        "--data-dir",
        help=f"where data lives ({DATA_DIR_DEFAULT}; the broker's: storePathRootDir if set)",
    )
    parser.add_argument("--namesrv-port", type=int, default=9876, help="0 picks a free port")
    parser.add_argument(
        "--broker-port", type=int, help="0 picks a free port (default: listenPort, or 10911)"
    )
    parser.add_argument(
        "--proxy-port",
        type=int,
        help="the gRPC proxy's port (8081; 0 picks a free port, the default with --namesrv-port 0)",
    )
    parser.add_argument(
        "--metrics-port",
        type=int,
        help="Prometheus /metrics port (5557; 0 picks a free port, the default with "
        "--namesrv-port 0); metricsExporterType in the config file chooses another exporter",
    )
    parser.add_argument(
        "-c", "--config", help="a broker.properties file with RocketMQ keys for anything else"
    )
    parser.add_argument(
        "--slaves", type=int, default=0, help="also run this many slaves of broker-a (0)"
    )
    parser.add_argument(
        "--sync", action="store_true", help="with slaves: SYNC_MASTER (a send waits for a slave)"
    )
    parser.add_argument(
        "--dledger",
        type=int,
        default=0,
        metavar="N",
        help="run broker-a as a DLedger group of N replicas (automatic failover)",
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    async def main() -> None:
        if args.slaves < 0:
            raise ConfigError("--slaves", str(args.slaves), "0 or more")
        if args.dledger < 0 or (args.dledger and args.slaves):
            raise ConfigError("--dledger", str(args.dledger), "0 or more, without --slaves")
        data_dir = args.data_dir or DATA_DIR_DEFAULT
        namesrv_config = NamesrvConfig(
            listen_port=args.namesrv_port,
            bind_address="127.0.0.1",
            kv_config_path=str(Path(data_dir) / "namesrv" / "kvConfig.json"),
        )
        # A development cluster lets producers recall timer messages; a config file may say no.
        broker_config = BrokerConfig(
            bind_address="127.0.0.1", broker_ip1="127.0.0.1", recall_message_enable=True
        )
        store_config = MessageStoreConfig()
        # The proxy's keys (`tls.server.mode`, ...) may sit in the same file.
        proxy_config = ProxyConfig(proxy_mode=ProxyMode.LOCAL, bind_address="127.0.0.1")
        # Unlike a lone broker, the all-in-one serves Prometheus unless the file says otherwise.
        metrics_config = MetricsConfig(exporter_type=ExporterType.PROM, prom_host="127.0.0.1")
        from_file = apply_config_file(
            args.config, broker_config, store_config, proxy_config, metrics_config
        )
        if args.metrics_port is not None:
            metrics_config.prom_port = args.metrics_port
        elif "metricsPromExporterPort" not in from_file:
            metrics_config.prom_port = 0 if args.namesrv_port == 0 else METRICS_PORT_DEFAULT
        hub = MetricsHub()
        exporter = MetricsExporter(metrics_config, hub, "127.0.0.1")

        def node_metrics(scope: str, node_type: str, node_id: str) -> MetricSource:
            source = source_for(
                metrics_config, scope, node_type, broker_config.broker_cluster_name, node_id
            )
            hub.add(source)
            return source

        # Flags beat the file, the file beats up's defaults (as for `pocketmq broker`).
        if args.broker_port is not None:
            broker_config.listen_port = args.broker_port
        elif "listenPort" not in from_file:
            broker_config.listen_port = BROKER_PORT_DEFAULT
        if args.data_dir is not None or "storePathRootDir" not in from_file:
            store_config.store_path_root_dir = str(Path(data_dir) / broker_config.broker_name)
        if args.slaves and args.sync:
            broker_config.broker_role = BrokerRole.SYNC_MASTER
        check_data_dir(str(Path(data_dir) / "namesrv"), "choose another with --data-dir")
        check_data_dir(store_config.store_path_root_dir, _store_dir_fix(args, from_file))
        namesrv = NamesrvServer(namesrv_config)
        namesrv.server.observe = RpcLatency(node_metrics("namesrv-meter", "nameserver", "namesrv"))
        brokers: list[BrokerServer] = []
        proxy_port = args.proxy_port
        if proxy_port is None:
            proxy_port = 0 if args.namesrv_port == 0 else PROXY_PORT_DEFAULT
        proxy_config.grpc_server_port = proxy_port
        proxy_config.rocketmq_cluster_name = broker_config.broker_cluster_name
        proxy = ProxyServer(proxy_config)
        node_metrics("proxy-meter", "proxy", "proxy").observe(
            catalog.PROXY_UP, lambda: [(("local",), 1.0 if proxy.port else 0.0)]
        )

        async def start() -> str:
            try:
                port = await namesrv.start()
            except OSError as exc:
                fix = "--namesrv-port N (0 picks a free port)"
                raise bind_failure(exc, "NameServer port", args.namesrv_port, fix) from None
            used = f"127.0.0.1:{port}"
            _maybe_warn_namesrv_addr(args.config, from_file, used)
            broker_config.namesrv_addr = used
            if args.dledger:
                configs = dledger_configs(broker_config, store_config, args.dledger, data_dir)
            else:
                configs = [(broker_config, store_config)]
                configs += [
                    _slave_configs(broker_config, store_config, i, data_dir)
                    for i in range(1, args.slaves + 1)
                ]
            for config, store in configs:
                # Replicas share a brokerName; one process serves them all, so each gets its own
                # node_id (RocketMQ's node_id is the brokerName, one process per replica).
                node_id = config.broker_name
                if brokers:
                    node_id += f"-{config.dleger_self_id if args.dledger else config.broker_id}"
                metrics = node_metrics("broker-meter", "broker", node_id)
                try:
                    broker = BrokerServer(config, store, metrics=metrics)
                except BrokerConfigError as exc:
                    raise StartupError(str(exc), status=2) from None
                try:
                    await broker.start()
                except OSError as exc:
                    fix = "--broker-port N (0 picks a free port)"
                    what = f"broker {config.broker_name} port"
                    raise broker_bind_failure(exc, broker, what, fix) from None
                brokers.append(broker)
            proxy.config.namesrv_addr = used
            first = brokers[0]
            if first.acl is not None or (first.auth is not None and first.auth.checking):
                # Local mode: the proxy checks its clients against the broker's rules (ACL 1.0)
                # or users (2.0) and reaches the brokers as an account that exists only in
                # this process.
                inner = SessionCredentials(
                    f"pocketmq-proxy-{secrets.token_hex(4)}", secrets.token_urlsafe(24)
                )
                for broker in brokers:
                    for hook in (broker.acl, broker.auth):
                        if hook is not None:
                            hook.allow_inner(inner.access_key, inner.secret_key)
                proxy.acl, proxy.inner = first.acl, inner
                proxy.auth = first.auth if first.acl is None else None
            try:
                served = await proxy.start()
            except TlsConfigError as exc:
                raise StartupError(str(exc), status=2) from None
            except OSError as exc:
                fix = "--proxy-port N (0 picks a free port)"
                raise bind_failure(exc, "proxy gRPC port", proxy_port, fix) from None
            with_metrics = await start_metrics(exporter)
            if args.dledger:
                return await _dledger_ready(brokers, port, data_dir, f"{served}{with_metrics}")
            slaves = "".join(f", slave {b.config.broker_id} {b.address}" for b in brokers[1:])
            return (
                f"up: NameServer 127.0.0.1:{port}, broker {broker_config.broker_name} "
                f"{brokers[0].address} ({broker_config.broker_role.value}){slaves}, proxy "
                f"127.0.0.1:{served}{with_metrics}, data in {data_dir}; Ctrl-C stops; "
                f"ready at 127.0.0.1:{port}"
            )

        async def stop() -> None:
            await exporter.stop()
            await proxy.stop()
            for broker in reversed(brokers):
                await broker.stop()
            await namesrv.stop()

        await serve_until_signalled(start, stop)

    return run_server(main, "pocketmq up")


BROKER_PORT_DEFAULT = 10911
PROXY_PORT_DEFAULT = 8081
METRICS_PORT_DEFAULT = 5557
DLEDGER_PORT_DEFAULT = 40911
LEADER_WAIT_S = 15.0


def dledger_configs(
    base: BrokerConfig, base_store: MessageStoreConfig, replicas: int, data_dir: str
) -> list[tuple[BrokerConfig, MessageStoreConfig]]:
    """Replica n0..n<N-1> of a DLedger group named after the broker: broker ports 10 apart
    from the base one and DLedger ports from 40911 on (free ones when the base port is 0),
    each its own data directory."""
    if base.listen_port:
        raft_ports = [DLEDGER_PORT_DEFAULT + i for i in range(replicas)]
    else:
        raft_ports = [free_port_run(1) for _ in range(replicas)]
    peers = ";".join(f"n{i}-127.0.0.1:{p}" for i, p in enumerate(raft_ports))
    configs = []
    for i in range(replicas):
        config = replace(
            base,
            enable_dleger_commit_log=True,
            dleger_group=base.dleger_group or base.broker_name,
            dleger_peers=peers,
            dleger_self_id=f"n{i}",
            listen_port=base.listen_port + 10 * i if base.listen_port else 0,
        )
        store = replace(
            base_store, store_path_root_dir=str(Path(data_dir) / f"{base.broker_name}-n{i}")
        )
        configs.append((config, store))
    return configs


async def _dledger_ready(
    brokers: list[BrokerServer], namesrv_port: int, data_dir: str, proxy: str
) -> str:
    deadline = asyncio.get_running_loop().time() + LEADER_WAIT_S
    leader = None
    while leader is None and asyncio.get_running_loop().time() < deadline:
        leader = next((b for b in brokers if b.dledger and b.dledger.serving), None)
        if leader is None:
            await asyncio.sleep(0.05)
    replicas = ", ".join(
        f"{b.config.dleger_self_id} {b.address}{' (master)' if b is leader else ''}"
        for b in brokers
    )
    if leader is None:
        log.warning("no DLedger leader within %.0f s; the group keeps electing", LEADER_WAIT_S)
    return (
        f"up: NameServer 127.0.0.1:{namesrv_port}, broker {brokers[0].config.broker_name} as a "
        f"DLedger group of {len(brokers)}: {replicas}; proxy 127.0.0.1:{proxy}; data in "
        f"{data_dir}; Ctrl-C stops; "
        f"ready at 127.0.0.1:{namesrv_port}"
    )


def _store_dir_fix(args: argparse.Namespace, from_file: dict[str, str]) -> str:
    if args.data_dir is None and "storePathRootDir" in from_file:
        return f"change storePathRootDir in {args.config} or pass --data-dir"
    return "choose another with --data-dir"


def _maybe_warn_namesrv_addr(config_path: str | None, from_file: dict[str, str], used: str) -> None:
    """One warning when the file names NameServers: `up` always uses its own."""
    wanted = from_file.get("namesrvAddr", "").strip()
    if wanted and wanted != used:
        log.warning(
            "%s: namesrvAddr=%s is overridden: pocketmq up runs its own NameServer, using "
            "namesrvAddr=%s",
            config_path,
            wanted,
            used,
        )


def _slave_configs(
    master: BrokerConfig, master_store: MessageStoreConfig, broker_id: int, data_dir: str
) -> tuple[BrokerConfig, MessageStoreConfig]:
    """Slave `broker_id` of the master: its own ports (10 apart from the master's, or free
    ones) and data directory, the master's other settings."""
    config = replace(
        master,
        broker_id=broker_id,
        broker_role=BrokerRole.SLAVE,
        listen_port=master.listen_port + 10 * broker_id if master.listen_port else 0,
    )
    store = replace(
        master_store,
        store_path_root_dir=str(Path(data_dir) / f"{master.broker_name}-s{broker_id}"),
        ha_listen_port=-1,
    )
    return config, store
