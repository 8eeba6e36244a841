import { notFound } from '#core/platform';
import { getMeteredApi } from '#db/metered-apis';
import type { Db } from '#db/sql';
import { apiUsage } from '#db/usage';
import { PLATFORM_USAGE_API } from './charging.js';

export { usageStats, usageSummary, type UsageTotals } from '#db/usage';

/** One API's usage by the account per day; the platform's own priced items count as APIs here. */
export async function apiUsageReport(db: Db, accountId: string, apiId: string, days: number) {
  const reserved = (Object.values(PLATFORM_USAGE_API) as string[]).includes(apiId);
  if (!reserved && !(await getMeteredApi(db, apiId))) throw notFound(`API ${apiId}`, 'List APIs with GET /api/v1/apis.');
  return apiUsage(db, accountId, apiId, days);
}
