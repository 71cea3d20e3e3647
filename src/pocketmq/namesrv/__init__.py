"""The NameServer: which brokers are alive and which of them serve each topic."""
