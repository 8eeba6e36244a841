export { ApiCache } from './api-cache.js';
export { apiPageAnswer, discoverAnswer, priceRulesOf, pricingRulesOf, searchAnswer, toApiSummary } from './answers.js';
export type { AnswerView, CallerView, DiscoverRequest, SearchRequest } from './answers.js';
export { AccessSnapshot, CallabilityCatalog, NO_ACCESS, callabilityOf, callerAccessOf, loadCallerAccess } from './callability.js';
export type { ApiAccess, CallerAccess } from './callability.js';
export {
  BROWSE_SORTS,
  POPULAR_WINDOW_DAYS,
  UNCATEGORIZED,
  categoryExists,
  categoryName,
  discover,
  getApi,
  listApis,
  listCategories,
  normalizeQuery,
  publishedBaseUrl,
  searchApis,
} from './catalog.js';
export type { BrowseSort } from './catalog.js';
export type { RankedRow } from './catalog.js';
export { evaluateDiscovery, loadDevset } from './eval.js';
export { DiscoveryListings, FEEDBACK_SATURATION, FEEDBACK_WINDOW_DAYS, feedbackSignal, listedApiIds } from './feedback.js';
export {
  alignTokenOnlyProviders,
  apiIdFor,
  directoryRoot,
  importDirectory,
  loadCuration,
  normalizeSpec,
  reindexApi,
  sourceCategories,
  specFiles,
} from './import.js';
export { isPlaceholderHost, keyDocsUrlOf, oauthOf, oauthProviderOf, operationScopes } from './security.js';
export type { ImportOptions } from './import.js';
export { LiveDirectoryIndex, restrictedAccess, splitCompound } from './index-loader.js';
export { inProcessRanking, RankPool } from './rank-pool.js';
export type { DirectoryRanking } from './rank-pool.js';
export { rankingServer, RemoteRanking } from './rank-remote.js';
export type { ApiSummaryRow } from './index-types.js';
export { directoryIndexingJob, enqueueDirectoryJob } from './indexing-job.js';
export { editDistance, similarity, wordSimilarityOf } from './scoring.js';
export { directorySettings } from './settings.js';
export { DEFAULT_MODEL_DIR, embedCatalog, modelDirSetting } from './semantic.js';
export { loadEmbedder } from './embedder.js';
export type { Embedder } from './embedder.js';
export { callabilityInstructions, generateInstructions, instructionsFooter, mcpInstructions, plainText, proxyPath } from './text.js';
export type { InstructionsDoor, InstructionsPrices } from './text.js';
export { isEnglishWord, relatedWords } from './wordnet.js';
export { identifierNeeds, taskNeeds } from './vocabulary.js';
export { listDocSections, listDocSectionsWithContent, readDocSection, searchDocSections } from './docs.js';
export type { DocHit, DocListRow, DocRow } from './docs.js';
export { voteOn, voteTally, withdrawVote } from './votes.js';
export type { Tally, VoteSubject, VoteTarget } from './votes.js';
