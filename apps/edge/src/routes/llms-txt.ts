import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { listDocSections, listDocSectionsWithContent, type DocListRow } from '#core/directory';
import { formatDollars } from '#contracts/money';
import { MCP_PATH } from '../mcp/plugin.js';

const TITLE = 'Agent API Platform';
const SUMMARY =
  'A directory of about 2,600 third-party APIs with natural-language discovery, a metered proxy that debits a prepaid balance per call, and cookbooks: multi-step procedures run as sessions, some steps done by a person. Built for software agents.';

const price = (row: DocListRow) => (row.price_micros === 0n ? 'free' : `$${formatDollars(row.price_micros)}`);

/** The head both files share: what the platform is, how to authenticate, where the MCP server and the API reference are. */
function head(site: string): string {
  return [
    `# ${TITLE}`,
    '',
    `> ${SUMMARY}`,
    '',
    'Authenticate every call with an API key: `Authorization: Bearer service_sk_...` (or `X-API-Key`). Get one with',
    `\`POST ${site}/api/v1/register\` and \`{"email": "...", "password": "..."}\`: the answer holds the key once. Priced`,
    'calls are debited from the prepaid balance; a 402 answer says the balance and the cost.',
    '',
    '## Connect',
    '',
    `- [MCP server](${site}${MCP_PATH}): Model Context Protocol over Streamable HTTP (revision 2026-07-28, 2025-11-25 too); send the API key as a Bearer token. Tools: discover_apis, search_apis, get_api, get_api_instructions, call_api, get_balance, get_usage, cookbooks and docs.`,
    `- [OpenAPI document](${site}/api/v1/openapi.json): every REST endpoint, its parameters and answers`,
    `- [API reference](${site}/api/v1/reference): the same, for people`,
    `- [Protected resource metadata](${site}/.well-known/oauth-protected-resource${MCP_PATH}): what the MCP endpoint expects as credentials`,
    '',
  ].join('\n');
}

/**
 * The llms.txt convention (https://llmstxt.org) at the site root: `/llms.txt` says what the platform
 * is, how to authenticate and where the MCP server, the OpenAPI document and each documentation
 * section are; `/llms-full.txt` inlines every section. Both come from the docs table, the same
 * source as GET /api/v1/docs, so they never disagree with it.
 */
const llmsTxtRoutes: FastifyPluginAsyncZod = async (app) => {
  const { sql, settings } = app.deps;
  const site = settings.PUBLIC_URL.replace(/\/+$/, '');
  const headers = { 'content-type': 'text/plain; charset=utf-8', 'cache-control': 'public, max-age=300' };

  app.get('/llms.txt', { schema: { hide: true } }, async (_request, reply) => {
    const docs = await listDocSections(sql);
    const lines = [
      head(site),
      '## Docs',
      '',
      'Each section through the API takes a key and costs what it says; llms-full.txt holds them all.',
      '',
      ...docs.map((doc) => `- [${doc.title}](${site}/api/v1/docs/${doc.slug}): ${doc.summary} (${price(doc)})`),
      '',
      '## Optional',
      '',
      `- [Full documentation](${site}/llms-full.txt): every section above in one file`,
      `- [Cookbooks](${site}/api/v1/cookbooks): the procedures sessions can run`,
      `- [Categories](${site}/api/v1/categories): the directory by category`,
      '',
    ];
    return reply.headers(headers).send(lines.join('\n'));
  });

  app.get('/llms-full.txt', { schema: { hide: true } }, async (_request, reply) => {
    const docs = await listDocSectionsWithContent(sql);
    const sections = docs.map((doc) => {
      // Each section's own headings move one level down, under the section's title.
      const body = doc.content
        .trim()
        .replace(/^# .*\n+/, '')
        .replace(/^(#{1,5}) /gm, '#$1 ');
      return `## ${doc.title}\n\nSource: ${site}/api/v1/docs/${doc.slug}\n\n${body}\n`;
    });
    return reply.headers(headers).send([head(site), ...sections].join('\n'));
  });
};

export default llmsTxtRoutes;
