"""A Schema Registry served by the broker: Confluent's REST API, state in the compacted ``_schemas`` topic.

Off unless ``schema.registry.listeners`` is set; the broker imports this package only then.

* ``errors``   - Confluent's error bodies (``error_code`` 40401, 40402, 40403, 42201, 409, ...).
* ``records``  - the key/value JSON of ``_schemas`` records, as Confluent's registry writes them.
* ``formats``  - parsing, stored and normal forms per schema type (AVRO with ``avro``, JSON with
                 ``jsonschema``, PROTOBUF with ``proto-schema-parser`` and ``protobuf``).
* ``compat``   - compatibility levels and the rules per schema type, as tables.
* ``store``    - the state (a fold over ``_schemas``) and the operations of the API; sans-IO.
* ``topic``    - the seam to the broker: ``_schemas`` created, appended to and read in its storage.
* ``api``      - the routes of the REST API.  ``http`` - a small HTTP/1.1 server (no aiohttp import).
* ``auth``     - basic authentication against the broker's users; TLS from the broker's PEM settings.
* ``metrics``  - counters on the broker's /metrics.  ``console`` - a page per subject with a diff.
* ``server``   - start/stop inside the broker (``Broker.start`` calls ``server.start``).
* ``cli``      - ``minikafka schema``: list, get, register, check, delete against a registry URL.
"""
