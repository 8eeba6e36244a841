import type { PricedCall } from '#core/billing';
import { notFound, PlatformError } from '#core/platform';
import { getDoc, listDocs, listDocsWithContent, searchDocs, type DocHit, type DocListRow, type DocRow } from '#db/docs';
import type { Db } from '#db/sql';

export type { DocHit, DocListRow, DocRow };

/** Every documentation section with its price, for the list, llms.txt and llms-full.txt. */
export { listDocs as listDocSections, listDocsWithContent as listDocSectionsWithContent };

/** Full-text search over the sections; a query with no letter or digit is refused (it matches nothing useful). */
export async function searchDocSections(db: Db, q: string | undefined): Promise<DocHit[]> {
  const query = q?.trim();
  if (!query || !/[\p{L}\p{N}]/u.test(query)) {
    throw new PlatformError('validation_failed', 'q is required: a word or two with a letter or digit', {
      hint: 'Search with a word or two, e.g. q=rate limits (GET /api/v1/docs/search?q=rate+limits, or search_docs over MCP).',
      tool: { hint: 'Search with a word or two, e.g. search_docs (q: "rate limits").' },
    });
  }
  return searchDocs(db, query);
}

/** One section in full, charged at its price through `charge`; an unknown section is charged nothing. */
export async function readDocSection(db: Db, slug: string, charge: (call: PricedCall) => Promise<unknown>): Promise<DocRow> {
  const doc = await getDoc(db, slug);
  if (!doc) throw notFound(`Doc section ${slug}`, 'Nothing was charged. GET /api/v1/docs lists every section.');
  await charge({ costMicros: doc.price_micros, item: 'doc', description: `doc ${doc.slug}` });
  return doc;
}
