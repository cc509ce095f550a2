# The broker in a container: data on a volume, Kafka's port published.
FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md ./
COPY protocol ./protocol
COPY storage ./storage
COPY broker ./broker
COPY pipeline ./pipeline
COPY minikafka ./minikafka
RUN pip install --no-cache-dir .
VOLUME /data
EXPOSE 9092 9644
# Bind every interface inside the container, but advertise the address clients on the host use.
CMD ["python", "-m", "minikafka", "serve", "--host", "0.0.0.0", "--port", "9092", "--advertised-host", "localhost", "--data-dir", "/data", "--override", "http.port=9644", "--override", "http.host=0.0.0.0"]
