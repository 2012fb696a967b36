# The catchup_assets code location, and the image its run pods run (K8sRunLauncher):
# the project and its locked dependencies (uv.lock, no dev group) in /opt/catchup.
#
#   docker build -t catchup-assets:TAG .                      # BASE: the official Python image
#   buildah bud --build-arg BASE=<image> -t catchup-assets:TAG .
#
# BASE is any Debian-like image with python3 3.11+ and its venv module (ensurepip):
# the official image for real builds; .ci/image-base makes a stand-in from Debian
# packages where no registry is reachable (docs/deploy.md, "Image").
#
# Non-root (uid 10001) and read-only-root friendly: the only paths written at run
# time are /tmp (also HOME), DAGSTER_HOME and /var/lib/catchup (the chart's workDir),
# each a VOLUME here and an emptyDir in charts/catchup-assets. Nothing writes
# bytecode at run time: it is compiled at build.
ARG BASE=python:3.11-slim-bookworm

FROM ${BASE} AS build
ARG UV_VERSION=0.13.9
# The environment is built where it will live (scripts' shebangs name the path), on
# the base's own python3 (the final stage has the same one), never a downloaded one.
ENV UV_PROJECT_ENVIRONMENT=/opt/catchup \
    UV_PYTHON=python3 \
    UV_PYTHON_DOWNLOADS=never \
    UV_NO_CACHE=1 \
    UV_LINK_MODE=copy \
    UV_COMPILE_BYTECODE=1
WORKDIR /src
# uv in a venv of its own: Debian's python3 refuses pip installs into the system (PEP 668).
RUN python3 -m venv /opt/uv \
    && /opt/uv/bin/pip install --no-cache-dir --disable-pip-version-check "uv==${UV_VERSION}"
# Dependencies first, from the lockfile alone: a code change rebuilds only the layers below.
COPY pyproject.toml uv.lock ./
RUN /opt/uv/bin/uv sync --frozen --no-dev --no-install-project
# The rest of the context (.dockerignore lets in only the package sources and README.md).
COPY . ./
# Not editable: the package is copied into the environment, which is all the final stage takes.
RUN /opt/uv/bin/uv sync --frozen --no-dev --no-editable

FROM ${BASE}
# Metadata first and the ~750 MB environment last: under buildah's vfs driver every
# step after it would copy it whole into a layer of its own.
ENV PATH=/opt/catchup/bin:$PATH \
    HOME=/tmp \
    DAGSTER_HOME=/opt/dagster/dagster_home \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
# A fixed uid, matching the chart's codeLocation.securityContext (runAsUser 10001), in
# /etc/passwd so that whatever asks for the user's name gets one.
RUN groupadd --gid 10001 catchup \
    && useradd --uid 10001 --gid 10001 --home-dir /tmp --no-create-home \
        --shell /usr/sbin/nologin catchup \
    && mkdir -p /opt/dagster/dagster_home /var/lib/catchup \
    && chown 10001:10001 /opt/dagster/dagster_home /var/lib/catchup
VOLUME ["/tmp", "/opt/dagster/dagster_home", "/var/lib/catchup"]
# The repository's workspace: `dagster definitions validate -w workspace.yaml` and
# `dagster dev -w workspace.yaml` load the project's definitions (catchup_assets.defs.definitions).
WORKDIR /opt/catchup-assets
COPY workspace.yaml ./
USER 10001:10001
EXPOSE 3030
# No ENTRYPOINT: the K8sRunLauncher gives run pods their whole command line as args
# (`dagster api execute_run ...`), and the chart sets the code server's. By default the
# image serves the project's definitions on the chart's port.
CMD ["dagster", "api", "grpc", "-m", "catchup_assets.defs.definitions", "-h", "0.0.0.0", "-p", "3030"]
# Owned by root: read-only to the user, whatever the filesystem.
COPY --from=build /opt/catchup /opt/catchup
