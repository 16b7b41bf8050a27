# relsync container image.
# Node.js 26 is the current LTS line (since October 2026); better-sqlite3 12
# supports it (engines 20.x … 26.x). A release build pins the base by digest:
#   docker build --build-arg NODE_IMAGE=node:26-slim@sha256:<digest> --build-arg VERSION=0.2.0 .
# (no registry is reachable from the machines this was written on, so no digest is written here).
ARG NODE_IMAGE=node:26-slim
FROM ${NODE_IMAGE} AS build
WORKDIR /src
# better-sqlite3 is compiled from source when no prebuilt binary can be fetched.
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 make g++ \
 && rm -rf /var/lib/apt/lists/*
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src src
# The image's software bill of materials (CycloneDX): the production dependencies as installed,
# written before the prune (npm sbom checks the tree against package.json, dev dependencies included).
RUN npx tsc -p tsconfig.build.json \
 && npm sbom --omit=dev --sbom-format=cyclonedx --sbom-type=application > sbom.cdx.json \
 && npm prune --omit=dev

FROM ${NODE_IMAGE}
ARG NODE_IMAGE
ARG VERSION=0.1.0
LABEL org.opencontainers.image.title="relsync" \
      org.opencontainers.image.description="Syncs objects and their related resources between platform clusters (Kubernetes or kcp) and a service cluster" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.base.name="${NODE_IMAGE}"
ENV NODE_ENV=production
# relsync needs node alone at run time: npm, npx and corepack go (less to patch, nothing to install with).
RUN rm -rf /usr/local/lib/node_modules/npm /usr/local/lib/node_modules/corepack /usr/local/bin/npm /usr/local/bin/npx /usr/local/bin/corepack
# Fewer glibc malloc arenas: relsync's native memory (TLS buffers, SQLite) does not need one per thread.
ENV MALLOC_ARENA_MAX=2
WORKDIR /app
COPY --from=build /src/package.json ./
COPY --from=build /src/node_modules node_modules
COPY --from=build /src/dist/src dist/src
COPY migrations migrations
COPY --from=build /src/sbom.cdx.json /app/sbom.cdx.json
# The store lives on a volume; the root filesystem can be mounted read-only.
RUN mkdir -p /var/lib/relsync && chown 65532:65532 /var/lib/relsync
VOLUME /var/lib/relsync
USER 65532:65532
EXPOSE 8080
# node handles SIGTERM itself (relsync drains in-flight reconciles, then exits).
ENTRYPOINT ["node", "/app/dist/src/cli/main.js"]
CMD ["run", "--config", "/etc/relsync/config.yaml"]
