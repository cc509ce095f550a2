import pytest

from storagetest import FakeClock


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()
