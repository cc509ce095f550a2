"""``python -m minikafka [serve ...]``: same as the ``minikafka`` command."""

from minikafka.broker.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
