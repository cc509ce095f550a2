"""``python -m minikafka.broker [serve ...]``: same as ``python -m minikafka``."""

from .cli import main

if __name__ == "__main__":
    raise SystemExit(main())
