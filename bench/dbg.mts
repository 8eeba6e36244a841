import { createSql } from '../db/src/sql.js';
import { discover } from '../db/src/directory.js';
const sql = createSql(process.env.DATABASE_URL!);
for (const q of process.argv.slice(2)) {
  const t = Date.now();
  const d = await discover(sql, q, 6);
  console.log(`\n${q} (${Date.now()-t}ms) ${JSON.stringify(d.plan.groups)} ${JSON.stringify(d.plan.weights.map(w=>w.toFixed(2)))} ${JSON.stringify(d.plan.corrections)}`);
  for (const r of d.results) console.log(`  ${r.score} cov=${(r.api as unknown as {coverage:number}).coverage?.toFixed(2)} ${r.api.id}`);
}
await sql.end();
