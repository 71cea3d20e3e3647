"""The blocking facade: the asyncio clients driven from a background event loop thread."""
