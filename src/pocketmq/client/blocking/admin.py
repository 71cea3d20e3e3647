"""The blocking admin client: every coroutine method of `pocketmq.client.aio.Admin` as a plain
call on the background loop (`admin.topic_route("Orders")`, `admin.create_topic(...)`)."""

from __future__ import annotations

import functools
import inspect
from typing import Any

from pocketmq.client.admin import Admin as AsyncAdmin
from pocketmq.client.blocking.loop import BackgroundLoop


class Admin:
    """Admin operations as blocking calls; `with Admin(["127.0.0.1:9876"]) as admin:`."""

    def __init__(
        self, namesrv_addresses: list[str], *, loop: BackgroundLoop | None = None, **options: Any
    ) -> None:
        """Creates the client; nothing connects until the first call.

        Args:
            namesrv_addresses: `host:port` of each NameServer.
            loop: A background loop to share with other blocking clients.
            **options: The keyword arguments of `pocketmq.client.aio.Admin` (`timeout_s`).
        """
        self.aio = AsyncAdmin(namesrv_addresses, **options)  # first: refused options leave no loop
        self._background = (loop or BackgroundLoop()).acquire()

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self.aio, name)
        if not inspect.iscoroutinefunction(attribute):
            return attribute

        @functools.wraps(attribute)
        def blocking(*args: Any, **kwargs: Any) -> Any:
            return self._background.call(attribute(*args, **kwargs))

        return blocking

    def close(self) -> None:
        """Closes the connections and stops the background loop."""
        try:
            self._background.call(self.aio.close())
        finally:
            self._background.release()

    def __enter__(self) -> Admin:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
