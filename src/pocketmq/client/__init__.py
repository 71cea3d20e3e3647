"""Clients of a pocketmq (or RocketMQ) cluster over the remoting protocol: the admin client."""
