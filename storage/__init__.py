"""Storage: partition logs on append-only segment files, and the metadata log (placeholder docstring)."""

from .config import LogConfig
from .log import AppendInfo, PartitionLog

__all__ = ["AppendInfo", "LogConfig", "PartitionLog"]
