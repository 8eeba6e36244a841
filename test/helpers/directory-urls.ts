/**
 * Search and discovery requests at the edges of what the ranking accepts (made-up words, empty and
 * punctuation-only tasks, an over-long task, an empty query, a bad cursor, browsing without a query):
 * the tests that compare two ways of ranking (in process, in worker threads, in the ranking process)
 * send them beside their ordinary queries, so both must answer each the same way.
 */
export const RANKING_EDGE_CASE_URLS: readonly string[] = [
  '/api/v1/discover?q=qzxqvjw%20vvbnqq',
  '/api/v1/discover?q=',
  '/api/v1/discover?q=%3F%3F%21',
  `/api/v1/discover?q=${'weather%20'.repeat(80)}`,
  '/api/v1/apis?q=',
  '/api/v1/apis?q=weather&cursor=not-a-cursor',
  '/api/v1/apis?limit=3',
];
