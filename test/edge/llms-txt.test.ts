import { readFileSync } from 'node:fs';
import { Ajv } from 'ajv';
import addFormats from 'ajv-formats';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listDocsWithContent } from '#db/docs';
import { createTestApp } from '../helpers/app.js';

const SITE = 'https://platform.example.test';
let app: FastifyInstance;
beforeAll(async () => {
  app = await createTestApp({ PUBLIC_URL: SITE });
});
afterAll(async () => {
  await app.close();
});

describe('llms.txt', () => {
  it('says what the platform is, how to authenticate, and links the MCP server, the OpenAPI document and every doc section', async () => {
    const res = await app.inject({ method: 'GET', url: '/llms.txt', headers: { accept: 'text/html' } });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toBe('text/plain; charset=utf-8');
    const text = res.body;
    // The llms.txt shape: an H1, a blockquote summary, then H2 sections of link lists.
    expect(text).toMatch(/^# Agent API Platform\n\n> \S/);
    expect(text).toContain(`[MCP server](${SITE}/mcp)`);
    expect(text).toContain(`(${SITE}/api/v1/openapi.json)`);
    expect(text).toContain('Authorization: Bearer service_sk_');
    expect(text).toContain(`POST ${SITE}/api/v1/register`);
    const docs = await listDocsWithContent(app.deps.sql);
    expect(docs.length).toBeGreaterThanOrEqual(10);
    for (const doc of docs) expect(text).toContain(`[${doc.title}](${SITE}/api/v1/docs/${doc.slug}): ${doc.summary}`);
    expect(text).toContain(`[Full documentation](${SITE}/llms-full.txt)`);
  });

  it('llms-full.txt inlines every section from the docs table', async () => {
    const res = await app.inject({ method: 'GET', url: '/llms-full.txt' });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toBe('text/plain; charset=utf-8');
    for (const doc of await listDocsWithContent(app.deps.sql)) {
      expect(res.body).toContain(`## ${doc.title}\n\nSource: ${SITE}/api/v1/docs/${doc.slug}`);
      // The body's paragraphs are there as written (a long line from the middle of each section).
      const line = doc.content
        .split('\n')
        .filter((l) => l.length > 40 && !l.startsWith('#'))
        .at(-1)!;
      expect(res.body, doc.slug).toContain(line);
    }
    // One H1 only: each section's headings sit under its H2.
    expect(res.body.match(/^# /gm)).toHaveLength(1);
  });
});

describe('server.json (MCP registry)', () => {
  const schema = JSON.parse(readFileSync(new URL('../fixtures/mcp-registry/server.schema.json', import.meta.url), 'utf8')) as Record<string, unknown>;
  const server = JSON.parse(readFileSync(new URL('../../server.json', import.meta.url), 'utf8')) as Record<string, unknown> & {
    version: string;
    remotes: { type: string; url: string; headers: { name: string; isRequired: boolean; isSecret: boolean }[] }[];
  };
  const ajv = new Ajv({ strict: false, allErrors: true });
  addFormats.default(ajv);
  const validate = ajv.compile(schema);

  it('validates against the registry schema, offers the streamable-http remote with an optional secret Authorization header (OAuth clients go without), and carries the package version', () => {
    expect(validate(server), JSON.stringify(validate.errors)).toBe(true);
    expect(server.$schema).toBe(schema.$id);
    expect(server.remotes[0]).toMatchObject({ type: 'streamable-http', url: expect.stringMatching(/\/mcp$/) });
    expect(server.remotes[0]!.headers).toEqual([expect.objectContaining({ name: 'Authorization', isRequired: false, isSecret: true })]);
    const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };
    expect(server.version).toBe(pkg.version);
  });

  it('the schema check is not vacuous: a remote without url, or an over-long description, is refused', () => {
    const noUrl = structuredClone(server);
    delete (noUrl.remotes[0] as Partial<(typeof server.remotes)[0]>).url;
    expect(validate(noUrl)).toBe(false);
    expect(validate({ ...server, description: 'x'.repeat(101) })).toBe(false);
    expect(validate({ ...server, name: 'no-slash' })).toBe(false);
  });
});
