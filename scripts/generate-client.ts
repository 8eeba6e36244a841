// `npm run generate:client`: regenerates packages/client/api-types.ts, the typed client's view of
// the OpenAPI document, with openapi-typescript. The document comes from the edge's own routes
// (the app is built in-process, as the tests build it; it needs Postgres and Redis like `npm run up`)
// or, with --url, from a running edge: `npm run generate:client -- --url http://127.0.0.1:3000`.
// test/edge/typed-client.test.ts fails when the committed file differs from what this writes.
import { writeFile } from 'node:fs/promises';
import { CLIENT_TYPES_PATH, renderClientTypes } from '#client/generate';
import { buildApp } from '#edge/app';
import { loadEdgeSettings } from '#edge/config';

async function documentFromApp(): Promise<object> {
  const app = await buildApp(loadEdgeSettings({ ...process.env, LOG_LEVEL: 'error' }));
  try {
    await app.ready();
    return app.swagger();
  } finally {
    await app.close();
  }
}

async function main(): Promise<void> {
  const at = process.argv.indexOf('--url');
  const url = at === -1 ? undefined : process.argv[at + 1];
  let document: object;
  if (url) {
    const response = await fetch(new URL('/api/v1/openapi.json', url));
    if (!response.ok) throw new Error(`GET ${url}/api/v1/openapi.json answered ${response.status}`);
    document = (await response.json()) as object;
  } else {
    document = await documentFromApp();
  }
  const text = await renderClientTypes(document);
  await writeFile(CLIENT_TYPES_PATH, text);
  console.log(`wrote ${CLIENT_TYPES_PATH} (${text.length} bytes) from ${url ?? 'the routes of this checkout'}`);
}

main().catch((error: unknown) => {
  console.error(`generate:client failed: ${(error as Error).message}`);
  process.exit(1);
});
