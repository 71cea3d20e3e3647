"""The broker's metadata files under `<storePathRootDir>/config/`, with RocketMQ's names.

`topics.json`, `subscriptionGroup.json`, `consumerOffset.json` and `delayOffset.json`, each a
`JsonFile` (crash-safe saves, `.bak` fallback); the topics' and the groups' also take one
entry's change at a time in a journal beside them (`JournaledJsonFile`). The store owns where
they live; the broker owns what they mean and when they are saved.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pocketmq.runtime.filesystem import OS_FILE_SYSTEM, FileSystem
from pocketmq.runtime.json_file import JsonFile
from pocketmq.runtime.json_journal import JournaledJsonFile


class BrokerMetadataFiles:
    """The broker's metadata files under `<storePathRootDir>/config/`, with RocketMQ's names."""

    def __init__(self, directory: str | os.PathLike[str], fs: FileSystem = OS_FILE_SYSTEM) -> None:
        self.directory = Path(os.fspath(directory))
        self._fs = fs
        self.topics = JournaledJsonFile(self.directory / "topics.json", "topicConfigTable", fs)
        self.subscription_groups = JournaledJsonFile(
            self.directory / "subscriptionGroup.json", "subscriptionGroupTable", fs
        )
        self.consumer_offsets = JsonFile(self.directory / "consumerOffset.json", fs)
        self.delay_offsets = JsonFile(self.directory / "delayOffset.json", fs)

    def all(self) -> list[JsonFile]:
        return [self.topics, self.subscription_groups, self.consumer_offsets, self.delay_offsets]

    def load_all(self) -> dict[str, Any]:
        """Reads every file that exists (name -> document), creating the directory if needed.

        Raises:
            MetadataError: a file and its `.bak` are both unreadable.
        """
        self._fs.make_dirs(self.directory)
        loaded = {}
        for json_file in self.all():
            document = json_file.load()
            if document is not None:
                loaded[json_file.path.name] = document
        return loaded
