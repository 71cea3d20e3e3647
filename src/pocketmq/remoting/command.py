"""The remoting command: the one message type of RocketMQ's remoting protocol.

A command is a request or a response (flag bit 0), optionally oneway (flag bit 1). Its header
fields travel as JSON or as the binary ROCKETMQ layout (see `headers.py`); the body travels as
raw bytes after the header (see `frame.py`). This module holds only the value type and its
constructors; it knows nothing of bytes.

Invariants: `ext_fields` maps strings to strings (callers stringify numbers and booleans the
way Java's `String.valueOf` would); `code` is a plain `int` on decoded commands, since peers may
send codes our enums do not know. A command is mutable because `RemotingConnection.send_request`
writes the opaque it assigns into it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from pocketmq.common.codes import LanguageCode
from pocketmq.remoting.errors import LocalProtocolError

FLAG_RESPONSE: Final = 1 << 0
"""Flag bit 0: the command is a response (`RemotingCommand.RPC_TYPE`)."""
FLAG_ONEWAY: Final = 1 << 1
"""Flag bit 1: the request expects no response (`RemotingCommand.RPC_ONEWAY`)."""

VERSION_CURRENT: Final = 479
"""The `version` we send: `MQVersion.Version.V5_3_3.ordinal()`, what a develop-branch Java peer
sends. NameServers pick the route JSON dialect by the requester's version (>= 401 quoted keys)."""


@dataclass(slots=True, repr=False)
class RemotingCommand:
    """One request or response of the remoting protocol.

    Attributes:
        code: A `RequestCode` on requests, a `ResponseCode` on responses (any int on decode).
        language: The sender's implementation language.
        version: The sender's `MQVersion` ordinal.
        opaque: Request id; a response carries its request's opaque.
        flag: Bit 0 response, bit 1 oneway.
        remark: Error text on responses; `None` when absent (an empty remark decodes as None).
        ext_fields: The custom header fields, strings to strings.
        body: The payload after the header; `b""` when there is none.
    """

    code: int
    language: LanguageCode = LanguageCode.PYTHON
    version: int = VERSION_CURRENT
    opaque: int = 0
    flag: int = 0
    remark: str | None = None
    ext_fields: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    suspended: bool = field(default=False, compare=False, repr=False)
    """Set by a handler that held the request (long polling); never on the wire."""

    @property
    def is_response(self) -> bool:
        """Whether flag bit 0 marks this command as a response."""
        return bool(self.flag & FLAG_RESPONSE)

    @property
    def is_oneway(self) -> bool:
        """Whether flag bit 1 marks this request as oneway (the peer sends no response)."""
        return bool(self.flag & FLAG_ONEWAY)

    @classmethod
    def request(
        cls,
        code: int,
        ext_fields: Mapping[str, str] | None = None,
        body: bytes = b"",
        *,
        oneway: bool = False,
        remark: str | None = None,
    ) -> RemotingCommand:
        """Build a request; `RemotingConnection.send_request` assigns its opaque.

        Args:
            code: The request code, usually a `RequestCode`.
            ext_fields: Custom header fields; copied, so the caller may reuse the mapping.
            body: The payload.
            oneway: Set flag bit 1: the peer will not answer.
            remark: Rarely used on requests; kept for completeness.

        Returns:
            A new request command with opaque 0.
        """
        # Positional (every field, in order): half the cost of keywords, once a request.
        return cls(
            code,
            LanguageCode.PYTHON,
            VERSION_CURRENT,
            0,
            FLAG_ONEWAY if oneway else 0,
            remark,
            dict(ext_fields) if ext_fields else {},
            body,
        )

    @classmethod
    def response_to(
        cls,
        request: RemotingCommand,
        code: int,
        remark: str | None = None,
        ext_fields: Mapping[str, str] | None = None,
        body: bytes = b"",
    ) -> RemotingCommand:
        """Build the response to `request`: same opaque, flag bit 0 set.

        Args:
            request: The request being answered.
            code: The response code, usually a `ResponseCode`.
            remark: Error text, or None.
            ext_fields: Response header fields; copied.
            body: The payload.

        Returns:
            A new response command; hand it to `RemotingConnection.send_response`.

        Raises:
            LocalProtocolError: `request` is itself a response.
        """
        if request.flag & FLAG_RESPONSE:
            raise LocalProtocolError(
                f"cannot answer opaque {request.opaque}: it is a response, not a request"
            )
        # Positional (every field, in order): half the cost of keywords, once an answer.
        return cls(
            code,
            LanguageCode.PYTHON,
            VERSION_CURRENT,
            request.opaque,
            FLAG_RESPONSE,
            remark,
            dict(ext_fields) if ext_fields else {},
            body,
        )

    def __repr__(self) -> str:
        # Bodies reach megabytes; a log line shows only their size.
        kind = "response" if self.is_response else "request"
        language = getattr(self.language, "name", self.language)
        return (
            f"RemotingCommand({kind} code={int(self.code)} opaque={self.opaque} flag={self.flag} "
            f"language={language} "
            f"version={self.version} remark={self.remark!r} ext_fields={self.ext_fields!r} "
            f"body=<{len(self.body)} bytes>)"
        )
