# One image for both processes of the compose file: the gateway (default CMD) and the example
# upstream stub (override the command with upstream-stub/src/server.ts).
#
# There is no build step: the app runs its TypeScript through tsx, which is a runtime
# dependency (`node --import tsx ...`, as in the package.json scripts), so the production
# install below is all the image needs.
FROM node:24-bookworm-slim

ENV NODE_ENV=production
WORKDIR /app

# Dependencies first, so code changes do not invalidate the install layer. The workspaces'
# package.json files come along: npm ci links @keygate/client (the gateway imports its protocol
# core) and needs to see @keygate/bench, a dev-only package it then leaves out.
COPY package.json package-lock.json ./
COPY client/package.json ./client/
COPY bench/package.json ./bench/
RUN npm ci --omit=dev --no-audit --no-fund \
 && npm cache clean --force

# Only what the processes run: sources, the launcher, and tsconfig.json (tsx reads it).
COPY tsconfig.json ./
COPY client/src/ ./client/src/
COPY gateway/ ./gateway/
COPY upstream-stub/ ./upstream-stub/
COPY scripts/ ./scripts/

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
CMD ["node", "--import", "tsx", "gateway/src/main.ts"]
