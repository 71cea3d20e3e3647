"""Message model, stored-message codec, constants and configuration loading. No network, no disk."""
