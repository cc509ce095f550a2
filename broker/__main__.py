"""``python -m broker [serve ...]``: same as the ``minikafka`` command."""

from .cli import main

if __name__ == "__main__":
    raise SystemExit(main())
