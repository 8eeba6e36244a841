# One image for the edge and the workers; docker-compose.yml picks the command.
FROM node:24-bookworm-slim
WORKDIR /app
COPY package.json package-lock.json ./
# patch-package applies these as npm ci's postinstall step (see patches/README.md).
COPY patches ./patches
# Dev dependencies too: the dashboard is built inside the image with Vite.
RUN npm ci --no-audit --no-fund --include=dev
COPY . .
RUN npm run build:dashboard
ENV NODE_ENV=production
EXPOSE 3000
CMD ["npx", "tsx", "apps/edge/src/server.ts"]
