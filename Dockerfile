# One image for both processes of the compose file: the gateway (default CMD) and the example
# upstream service (command: node dist/upstream-stub/src/server.js).
#
# Two stages. The build stage installs everything and compiles the TypeScript (npm run build);
# the runtime stage holds the compiled JavaScript and the production dependencies only: no
# TypeScript, tsx or esbuild, and the files it runs are read-only to the unprivileged process.

# ---- build ----
FROM node:24-bookworm-slim AS build
WORKDIR /src
# Dependencies first, so code changes do not invalidate the install layer. The workspaces'
# package.json files come along: npm ci needs them to match the lockfile.
COPY package.json package-lock.json ./
COPY client/package.json ./client/
COPY bench/package.json ./bench/
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY client/tsconfig.json ./client/
COPY client/src/ ./client/src/
COPY gateway/src/ ./gateway/src/
COPY upstream-stub/src/ ./upstream-stub/src/
COPY gateway/portal/ ./gateway/portal/
COPY scripts/build-portal.ts ./scripts/
RUN npm run build

# ---- runtime ----
FROM node:24-bookworm-slim
ENV NODE_ENV=production
WORKDIR /app
COPY package.json package-lock.json ./
COPY client/package.json ./client/
COPY bench/package.json ./bench/
RUN npm ci --omit=dev --no-audit --no-fund \
 && npm cache clean --force
# The compiled gateway, the example service and the client code they import; the example routes.
COPY --from=build /src/dist/ ./dist/
COPY gateway/examples/ ./gateway/examples/

# The files stay root-owned (read-only to the process); the process runs unprivileged.
USER node

# Listen on every interface inside the container (the code's default is 127.0.0.1).
ENV HOST=0.0.0.0 \
    PORT=8080
EXPOSE 8080

# Slim images have no curl: use node's own fetch. /healthz is the gateway's; the upstream
# service of docker-compose.yml replaces this check with its own.
HEALTHCHECK --interval=10s --timeout=3s --start-period=15s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:' + (process.env.PORT || 8080) + '/healthz').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]

# Exec form: node is PID 1 and gets SIGTERM itself; both servers handle it and shut down cleanly.
CMD ["node", "dist/gateway/src/main.js"]
