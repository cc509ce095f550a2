"""Security: listeners and their TLS, SASL mechanisms, the authorizer and its ACL store.

- ``listeners``: Kafka's ``listeners`` / ``advertised.listeners`` /
  ``listener.security.protocol.map`` parsed into :class:`Listener` objects; the server opens one
  asyncio server per listener, the connection remembers which one a client came in on.
- ``tls``: an ``ssl.SSLContext`` per listener from Kafka's PEM key/trust store settings, and the
  principal of a mutual-TLS client (``ssl.principal.mapping.rules``).
- ``sasl``: the per-connection SASL state machine (SaslHandshake 17, SaslAuthenticate 36, the v0
  handshake's raw token framing) and the mechanisms PLAIN, SCRAM-SHA-256/512 (``scram``) and
  OAUTHBEARER with the unsecured validator (``oauthbearer``).
"""
