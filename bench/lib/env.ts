import { z } from 'zod';
import { migrate } from '#db/migrate';
import { parseSettings, sharedSettings } from '#core/platform';

/** Benchmarks run against their own database (created by scripts/bench.sh), never the dev or test one. */
export const benchSettings = parseSettings(
  sharedSettings.extend({
    DATABASE_URL: z.string().url().default('postgres://postgres@127.0.0.1:5432/platform_bench'),
    BENCH_DURATION_SECONDS: z.coerce.number().int().min(1).max(600).default(10),
    BENCH_REPEATS: z.coerce.number().int().min(1).max(20).default(3),
  }),
);

export async function prepareDatabase(): Promise<void> {
  await migrate(benchSettings.DATABASE_URL);
}
