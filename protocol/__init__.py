"""Sans-IO Kafka wire protocol: specs -> codec, framing, record batches, error codes (no asyncio)."""
