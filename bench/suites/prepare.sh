#!/usr/bin/env bash
# Fetch and prepare the client suites that bench/suites/*.sh run (outside the project tree).
# Usage: bench/suites/prepare.sh DIR     (needs git, python3, npm, go, a C toolchain)
# The two suites that hard-code their brokers get a small edit, described here:
#  - aiokafka: tests/conftest.py gets a block, active when AIOKAFKA_EXTERNAL=host:port is set, that
#    redefines the fixtures docker (None), kafka_image (the --docker-image value), ssl_folder
#    (AIOKAFKA_SSL_FOLDER: ca.crt, client.crt, client.key), kafka_server (KafkaServer(host, port,
#    AIOKAFKA_EXTERNAL_SSL_PORT, 1, 1, None)) and acl_manager, kafka_config, kerberos_utils (None).
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
    _ext_host, _ext_port = os.environ["AIOKAFKA_EXTERNAL"].rsplit(":", 1)

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
        yield KafkaServer(_ext_host, int(_ext_port), ssl_port, 1, 1, None)

    @pytest.fixture(scope="class")
    def acl_manager():
        return None

    @pytest.fixture(scope="class")
    def kafka_config():
        return None

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
aiokafka-venv/bin/pip install -q -e ./aiokafka pytest==9.0.2 pytest-asyncio==1.3.0 pytest-mock pytest-timeout docker==7.1.0 cramjam async-timeout
(cd kafkajs && npm install --ignore-scripts --no-audit --no-fund)
(cd franz-go/pkg/kgo && go test -c -o "$D/kgo.test" .)
(cd librdkafka && ./configure --disable-sasl --disable-curl --disable-gssapi --enable-zstd --enable-lz4-ext --enable-ssl \
   && make -j2 libs && make -C tests -j2 build)
