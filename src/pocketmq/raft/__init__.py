"""Raft consensus: a pure core (`core.py`), its log storage, and the asyncio driver
(`node.py`) that replicates any state machine over the remoting transport."""
