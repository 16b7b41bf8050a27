# relsync container image.
# Node.js 26 is the current LTS line (since October 2026); better-sqlite3 12
# supports it (engines 20.x … 26.x).
FROM node:26-slim AS build
WORKDIR /src
# better-sqlite3 is compiled from source when no prebuilt binary can be fetched.
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 make g++ \
 && rm -rf /var/lib/apt/lists/*
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src src
RUN npx tsc -p tsconfig.build.json && npm prune --omit=dev

FROM node:26-slim
ENV NODE_ENV=production
# Fewer glibc malloc arenas: relsync's native memory (TLS buffers, SQLite) does not need one per thread.
ENV MALLOC_ARENA_MAX=2
WORKDIR /app
COPY --from=build /src/package.json ./
COPY --from=build /src/node_modules node_modules
COPY --from=build /src/dist/src dist/src
COPY migrations migrations
# The store lives on a volume; the root filesystem can be mounted read-only.
RUN mkdir -p /var/lib/relsync && chown 65532:65532 /var/lib/relsync
VOLUME /var/lib/relsync
USER 65532:65532
EXPOSE 8080
# node handles SIGTERM itself (relsync drains in-flight reconciles, then exits).
ENTRYPOINT ["node", "/app/dist/src/cli/main.js"]
CMD ["run", "--config", "/etc/relsync/config.yaml"]
