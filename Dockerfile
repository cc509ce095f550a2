# The broker in a container: data on a volume, Kafka's port published.
FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml setup.py README.md ./
COPY protocol ./protocol
COPY storage ./storage
COPY broker ./broker
COPY pipeline ./pipeline
COPY minikafka ./minikafka
# A C compiler for the produce validator's extension (protocol/_validate.c), removed afterwards.
RUN apt-get update && apt-get install -y --no-install-recommends gcc libc6-dev \
    && pip install --no-cache-dir . \
    && apt-get purge -y gcc libc6-dev && apt-get autoremove -y && rm -rf /var/lib/apt/lists/*
VOLUME /data
EXPOSE 9092 9644 8081
# Bind every interface inside the container, but advertise the address clients on the host use.
CMD ["python", "-m", "minikafka", "serve", "--host", "0.0.0.0", "--port", "9092", "--advertised-host", "localhost", "--data-dir", "/data", "--override", "http.port=9644", "--override", "http.host=0.0.0.0", "--override", "schema.registry.listeners=http://0.0.0.0:8081"]
