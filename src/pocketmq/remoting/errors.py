"""Errors of the remoting codec, split by whose fault they are.

`LocalProtocolError` means our own caller misused the API (sent a request on a closed
connection, put a non-string in `ext_fields`, built a frame larger than the limit); the
connection stays usable. `RemoteProtocolError` means the peer sent bytes that are not a valid
RocketMQ remoting frame; the connection is dead from then on and must be closed.
"""

from __future__ import annotations


class RemotingError(Exception):
    """Base class of every error raised by `pocketmq.remoting`."""


class LocalProtocolError(RemotingError):
    """Our caller asked for something the protocol cannot express or the connection forbids."""


class RemoteProtocolError(RemotingError):
    """The peer sent bytes that break the remoting protocol; close the connection."""
