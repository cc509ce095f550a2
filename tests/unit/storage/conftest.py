import pytest

from storagetest import FakeClock


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def no_fsync(monkeypatch):
    """For tests of process crashes (the page cache survives them): skip the disk round trips."""
    from minikafka.storage import fs

    monkeypatch.setattr(fs, "fsync", lambda fd: None)
