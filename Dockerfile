# lahar's image: every process is `lahar <command>` (webhook, dispatch, worker, scheduler, beat, flower, certs).
#   docker build -t lahar:0.1.0 .        then see deploy/ (kubectl apply -k deploy/)
# Runs as a non-root user (uid 10001) and needs no writable root filesystem: deploy/ mounts /tmp and
# /var/lib/lahar as emptyDirs and runs it with readOnlyRootFilesystem.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /src
COPY pyproject.toml README.md ./
# lahar/ holds links to the folders below (lahar/kube -> ../kube): they are all copied, then installed as one
COPY lahar/ lahar/
COPY kube/ kube/
COPY certs/ certs/
COPY policies/ policies/
COPY scheduler/ scheduler/
COPY webhooks/ webhooks/
COPY controllers/ controllers/
COPY devcluster/ devcluster/
COPY deploy/ deploy/
COPY examples/ examples/
RUN pip install . && rm -rf /src

# the webhook configurations `lahar certs ensure --manifests /opt/lahar/webhooks` registers with their caBundle
COPY deploy/webhooks/ /opt/lahar/webhooks/

RUN groupadd --system --gid 10001 lahar \
    && useradd --system --uid 10001 --gid 10001 --home-dir /tmp --no-create-home --shell /usr/sbin/nologin lahar \
    && mkdir -p /var/lib/lahar && chown 10001:10001 /var/lib/lahar

USER 10001:10001
WORKDIR /tmp
ENV HOME=/tmp LAHAR_DATA_DIR=/var/lib/lahar
EXPOSE 8443 5555 9090
ENTRYPOINT ["lahar"]
CMD ["--help"]
