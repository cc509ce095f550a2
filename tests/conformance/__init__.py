"""Differential conformance: the same requests to Apache Kafka 4.2 and to minikafka, compared.

``make conformance`` (``python -m tests.conformance``) and the pytest test in this directory run
the corpus (corpus/), normalise (normalize.py), compare and classify (engine.py) against the
allowed differences (allowed.toml) and write conformance-report.md.
"""
