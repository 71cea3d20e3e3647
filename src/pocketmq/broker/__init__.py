"""The broker: request processors over the message store, and the tables it owns."""
