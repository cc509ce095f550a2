#!/usr/bin/env bash
# Fetch and prepare the client suites that bench/suites/*.sh run (outside the project tree).
# Usage: bench/suites/prepare.sh DIR     (needs git, python3, npm, go, a C toolchain)
# The two suites that hard-code their brokers get a small edit, described here:
#  - aiokafka: tests/conftest.py gets a block, active when AIOKAFKA_EXTERNAL=host:port is set, that
#    redefines the fixtures docker (None), kafka_image (the --docker-image value), ssl_folder
#    (AIOKAFKA_SSL_FOLDER: ca.crt, client.crt, client.key), kafka_server (KafkaServer(host, port,
#    AIOKAFKA_EXTERNAL_SSL_PORT, AIOKAFKA_EXTERNAL_SASL_PORT, 1, None)), acl_manager (the tests'
#    kafka-acls options as CreateAcls/DeleteAcls through kafka-python, logged in as the super user
#    admin), kafka_config (SCRAM users through AIOKAFKA_SCRAM_CMD) and kerberos_utils (None).
#  - kafkajs: testHelpers/index.js takes the host from KAFKAJS_HOST and the one broker's ports from
#    KAFKAJS_PLAINTEXT_PORT, KAFKAJS_SSL_PORT, KAFKAJS_SASL_PORT (plainTextBrokers(), sslBrokers(),
#    saslBrokers(), the connection options and the admin helper).
set -eu
D=$1; mkdir -p "$D"; cd "$D"
clone() { [ -d "$2" ] || git clone -q "https://github.com/$1.git" "$2"; git -C "$2" checkout -q "$3"; }
clone aio-libs/aiokafka aiokafka v0.14.0
clone tulios/kafkajs kafkajs v2.2.4
clone twmb/franz-go franz-go adb3a18a
clone confluentinc/librdkafka librdkafka v2.15.0

if ! grep -q AIOKAFKA_EXTERNAL aiokafka/tests/conftest.py; then
cat >> aiokafka/tests/conftest.py <<'PY'
if os.environ.get("AIOKAFKA_EXTERNAL"):  # an external broker instead of a container
    import subprocess as _subprocess

    _ext_host, _ext_port = os.environ["AIOKAFKA_EXTERNAL"].rsplit(":", 1)

    class _ExternalACLManager:
        """kafka-acls.sh's --add/--remove/--list through the Admin API (kafka-python)."""

        def __init__(self, bootstrap):
            self._bootstrap = bootstrap
            self._client = None
            self._active_acls = []

        @property
        def _admin(self):
            if self._client is None:
                import warnings
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    from kafka.admin import KafkaAdminClient
                    # as the super user admin over SASL (the ACL checks apply to this client too)
                    self._client = KafkaAdminClient(
                        bootstrap_servers=self._bootstrap, security_protocol="SASL_PLAINTEXT",
                        sasl_mechanism="PLAIN", sasl_plain_username="admin", sasl_plain_password="admin")
            return self._client

        def _acls(self, cluster=None, topic=None, group=None, transactional_id=None,
                  allow_principal=None, deny_principal=None, allow_host=None, deny_host=None,
                  operation=None, producer=None, consumer=None):
            import warnings
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                from kafka.admin import (ACL, ACLOperation as Op, ACLPermissionType as Perm,
                                         ACLResourcePatternType as Pat, ResourcePattern, ResourceType as RT)
            resources = []
            if cluster:
                resources.append((RT.CLUSTER, "kafka-cluster"))
            if topic is not None:
                resources.append((RT.TOPIC, topic))
            if group is not None:
                resources.append((RT.GROUP, group))
            if transactional_id is not None:
                resources.append((RT.TRANSACTIONAL_ID, transactional_id))
            if allow_principal is not None:
                principal, perm, host = f"User:{allow_principal}", Perm.ALLOW, allow_host or "*"
            else:
                principal, perm, host = f"User:{deny_principal}", Perm.DENY, deny_host or "*"
            pairs = []
            if operation is not None:
                op = Op[operation.upper().replace("DESCRIBECONFIGS", "DESCRIBE_CONFIGS")
                        .replace("ALTERCONFIGS", "ALTER_CONFIGS").replace("IDEMPOTENTWRITE", "IDEMPOTENT_WRITE")]
                pairs += [(rt, name, op) for rt, name in resources]
            if producer is not None:  # kafka-acls --producer
                for rt, name in resources:
                    if rt == RT.TOPIC:
                        pairs += [(rt, name, Op.WRITE), (rt, name, Op.DESCRIBE), (rt, name, Op.CREATE)]
                    if rt == RT.TRANSACTIONAL_ID:
                        pairs += [(rt, name, Op.WRITE), (rt, name, Op.DESCRIBE)]
            if consumer is not None:  # kafka-acls --consumer
                for rt, name in resources:
                    if rt == RT.TOPIC:
                        pairs += [(rt, name, Op.READ), (rt, name, Op.DESCRIBE)]
                    if rt == RT.GROUP:
                        pairs += [(rt, name, Op.READ)]
            return [ACL(principal=principal, host=host, operation=op, permission_type=perm,
                        resource_pattern=ResourcePattern(rt, name, Pat.LITERAL)) for rt, name, op in pairs]

        def add_acl(self, **acl_params):
            result = self._admin.create_acls(self._acls(**acl_params))
            if result.get("failed"):
                raise RuntimeError(f"Failed to apply ACL: {result['failed']}")
            self._active_acls.append(acl_params)

        def remove_acl(self, **acl_params):
            self._admin.delete_acls(self._acls(**acl_params))
            self._active_acls.remove(acl_params)

        def list_acl(self, principal=None):
            return None

        def cleanup(self):
            for acl_params in self._active_acls[:]:
                self.remove_acl(**acl_params)

    class _ExternalKafkaConfig:
        """kafka-configs.sh --add-config SCRAM-SHA-256/512 through AlterUserScramCredentials."""

        def __init__(self, bootstrap):
            self._bootstrap = bootstrap

        def add_scram_user(self, username, password):
            cmd = os.environ["AIOKAFKA_SCRAM_CMD"].split()
            env = dict(os.environ, SCRAM_USER_SASL="PLAIN:admin:admin")  # as the super user
            for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
                _subprocess.run([*cmd, self._bootstrap, username, password, mechanism], check=True,
                                capture_output=True, timeout=60, env=env)

    @pytest.fixture(scope="session")
    def docker(request):
        yield None

    @pytest.fixture(scope="session")
    def kafka_image(request):
        image = request.config.getoption("--docker-image")
        if not image:
            pytest.skip("no --docker-image")
        return image

    @pytest.fixture(scope="session")
    def ssl_folder():
        folder = os.environ.get("AIOKAFKA_SSL_FOLDER")
        return pathlib.Path(folder) if folder else None

    @pytest.fixture(scope="session")
    def kafka_server(kafka_image):
        ssl_port = int(os.environ.get("AIOKAFKA_EXTERNAL_SSL_PORT", "1"))
        sasl_port = int(os.environ.get("AIOKAFKA_EXTERNAL_SASL_PORT", "1"))
        yield KafkaServer(_ext_host, int(_ext_port), ssl_port, sasl_port, 1, None)

    _sasl_bootstrap = f"{_ext_host}:{os.environ.get('AIOKAFKA_EXTERNAL_SASL_PORT', '1')}"

    @pytest.fixture(scope="class")
    def acl_manager():
        return _ExternalACLManager(_sasl_bootstrap) if os.environ.get("AIOKAFKA_SCRAM_CMD") else None

    @pytest.fixture(scope="class")
    def kafka_config():
        return _ExternalKafkaConfig(_sasl_bootstrap) if os.environ.get("AIOKAFKA_SCRAM_CMD") else None

    @pytest.fixture(scope="class")
    def kerberos_utils():
        return None
PY
fi
python3 - kafkajs/testHelpers/index.js <<'PY'
import re, sys
p = sys.argv[1]; s = open(p).read()
if "KAFKAJS_PLAINTEXT_PORT" not in s:
    s = re.sub(r"const getHost = \(\) => 'localhost'",
               "const getHost = () => process.env.KAFKAJS_HOST || 'localhost'", s, count=1)
    s = re.sub(r"(const plainTextBrokers = \(host = getHost\(\)\) => )",
               r"\1process.env.KAFKAJS_PLAINTEXT_PORT ? [`${host}:${process.env.KAFKAJS_PLAINTEXT_PORT}`] : ", s, count=1)
    s = re.sub(r"\n  port: 9092,\n", "\n  port: parseInt(process.env.KAFKAJS_PLAINTEXT_PORT || '9092', 10),\n", s, count=1)
    s = s.replace("brokers: [`${getHost()}:9092`]", "brokers: plainTextBrokers()")
    s = re.sub(r"(const sslBrokers = \(host = getHost\(\)\) => )",
               r"\1process.env.KAFKAJS_SSL_PORT ? [`${host}:${process.env.KAFKAJS_SSL_PORT}`] : ", s, count=1)
    s = re.sub(r"(const saslBrokers = \(host = getHost\(\)\) => )",
               r"\1process.env.KAFKAJS_SASL_PORT ? [`${host}:${process.env.KAFKAJS_SASL_PORT}`] : ", s, count=1)
    s = s.replace("    port: 9093,\n", "    port: parseInt(process.env.KAFKAJS_SSL_PORT || '9093', 10),\n")
    s = s.replace("    port: 9094,\n", "    port: parseInt(process.env.KAFKAJS_SASL_PORT || '9094', 10),\n")
    open(p, "w").write(s)
PY

python3 -m venv aiokafka-venv
aiokafka-venv/bin/pip install -q -e ./aiokafka kafka-python pytest==9.0.2 pytest-asyncio==1.3.0 pytest-mock pytest-timeout docker==7.1.0 cramjam async-timeout
(cd kafkajs && npm install --ignore-scripts --no-audit --no-fund)
(cd franz-go/pkg/kgo && go test -c -o "$D/kgo.test" .)
(cd librdkafka && ./configure --disable-sasl --disable-curl --disable-gssapi --enable-zstd --enable-lz4-ext --enable-ssl \
   && make -j2 libs && make -C tests -j2 build)
