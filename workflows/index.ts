// The workflow bundle's entry point: the Temporal worker bundles this file. Workflow code is
// deterministic only and imports activities as types.
export { cookbookSession } from './cookbook-session.js';
