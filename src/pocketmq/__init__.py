"""pocketmq: a light messaging system that follows Apache RocketMQ's architecture and protocols."""

__version__ = "0.1.0"
