"""The asyncio Kafka broker: server, connections, handlers, controller and CLI."""
