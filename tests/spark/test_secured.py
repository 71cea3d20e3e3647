"""The data source against a cluster that checks ACL 1.0 and serves TLS: with the `accessKey`,
`secretKey` and `tls` options a batch write and read go through; without the account the read
fails with the broker's reason."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from pocketmq.client import Admin
from pocketmq.client.admin.values import TopicSettings
from pocketmq.client.credentials import SessionCredentials
from pocketmq.testing import ServerProcess, start_up_process

RULES = """\
accounts:
  - accessKey: sparkJobAK
    secretKey: spark-job-secret
    admin: false
    defaultTopicPerm: PUB|SUB
    defaultGroupPerm: PUB|SUB
  - accessKey: adminAccount
    secretKey: admin-secret-0
    admin: true
"""
ACCOUNT = {"accessKey": "sparkJobAK", "secretKey": "spark-job-secret", "tls": "true"}


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    work = tmp_path_factory.mktemp("secured")
    rules = work / "plain_acl.yml"
    rules.write_text(RULES)
    config = work / "broker.properties"
    config.write_text(
        f"aclEnable=true\naclFilePath={rules}\ntls.server.mode=enforcing\ntls.enable=true\n"
    )
    server = start_up_process(work / "data", work / "up.log", "-c", str(config))
    try:
        admin = SessionCredentials("adminAccount", "admin-secret-0")
        with Admin([server.address], tls=True, credentials=admin) as client:
            client.create_topic(TopicSettings("SparkSecured", 2, 2), cluster="DefaultCluster")
        yield server
    finally:
        server.stop()


def test_a_job_with_the_account_writes_and_reads_and_one_without_is_refused(
    spark: SparkSession, secured: ServerProcess
) -> None:
    rows = [(f"secured {n}".encode(),) for n in range(50)]
    frame = spark.createDataFrame(rows, "body binary")
    frame.write.format("pocketmq").option("namesrv", secured.address).option(
        "topic", "SparkSecured"
    ).options(**ACCOUNT).mode("append").save()
    back = (
        spark.read.format("pocketmq")
        .option("namesrv", secured.address)
        .option("topic", "SparkSecured")
        .options(**ACCOUNT)
        .load()
        .collect()
    )
    assert sorted(r.body for r in back) == sorted(r[0] for r in rows)
    anonymous = (
        spark.read.format("pocketmq")
        .option("namesrv", secured.address)
        .option("topic", "SparkSecured")
        .option("tls", "true")
        .load()
    )
    with pytest.raises(Exception, match="carries no AccessKey"):
        anonymous.collect()
    log = Path(secured.log_path).read_text(errors="replace")
    assert "spark-job-secret" not in log
