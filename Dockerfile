# syntax=docker/dockerfile:1
# The `pipeline` image that deploy/kubernetes-indexed-job.yaml, deploy/kubernetes-finalize-job.yaml
# and deploy/airflow_dag.py run. With a Docker daemon:
#
#   docker build -t registry.example.com/attention-classifier/pipeline:0.1.0 .
#
# Without one (buildah and podman, as CI builds and runs it): scripts/build-image.sh.
#
# The binary and ONNX Runtime come from one of two stages, chosen by BINARY_SOURCE:
# - `compiled` (the default): a Rust stage builds the release binary (the default model
#   compiled in) from the sources and strips it, and takes ONNX Runtime's CPU library from
#   its PyPI wheel; a cold build, about 40 minutes on 2 cores.
# - `prebuilt`: both taken from target/image-context/, where scripts/build-image.sh puts a
#   binary built earlier (CI's own test build) and the library the tests installed; seconds.
# buildah 1.28 (Debian bookworm) picks stages without the ARG's default: pass
# `--build-arg BINARY_SOURCE=compiled` to it explicitly (Docker's BuildKit needs nothing).
# The final stage is Debian slim with CA certificates (object storage over TLS), the binary,
# the library and deploy/run-shard.sh, run as an unprivileged user. Both base images can be
# overridden (a mirror, a pinned digest, or a base made locally by mmdebstrap).
ARG RUST_IMAGE=rust:1.95-slim-bookworm
ARG RUNTIME_IMAGE=debian:bookworm-slim
ARG BINARY_SOURCE=compiled

FROM ${RUST_IMAGE} AS compiled
# python3-pip: scripts/install-onnxruntime.sh fetches the onnxruntime wheel with `pip download`.
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3 python3-pip binutils \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked --bin pipeline \
    && strip -o /usr/local/bin/pipeline target/release/pipeline
RUN bash scripts/install-onnxruntime.sh /opt/onnxruntime

FROM scratch AS prebuilt
COPY target/image-context/pipeline /usr/local/bin/pipeline
COPY target/image-context/onnxruntime/ /opt/onnxruntime/

FROM ${BINARY_SOURCE} AS binary

FROM ${RUNTIME_IMAGE}
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates \
    && apt-get clean && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin \
    && groupadd --system --gid 10001 pipeline \
    && useradd --system --uid 10001 --gid 10001 --home-dir /home/pipeline --create-home pipeline
COPY --from=binary /usr/local/bin/pipeline /usr/local/bin/pipeline
COPY --from=binary /opt/onnxruntime/ /opt/onnxruntime/
COPY deploy/run-shard.sh /deploy/run-shard.sh
# ONNX Runtime named explicitly, so a broken library fails the run instead of falling back to
# tract (about 1.3× slower); models given as s3:// URLs, and the default model, are cached in
# the user's home (the Jobs mount a scratch volume there, the root filesystem being read-only).
ENV ORT_DYLIB_PATH=/opt/onnxruntime/libonnxruntime.so.1.32.0
USER 10001:10001
WORKDIR /home/pipeline
ENTRYPOINT ["/usr/local/bin/pipeline"]
CMD ["--help"]
