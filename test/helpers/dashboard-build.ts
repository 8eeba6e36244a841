import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
export const DASHBOARD_DIR = join(ROOT, 'apps/dashboard');
export const DASHBOARD_INDEX = join(DASHBOARD_DIR, 'dist/index.html');

function newestSource(path: string): number {
  const stat = statSync(path);
  if (!stat.isDirectory()) return stat.mtimeMs;
  return Math.max(0, ...readdirSync(path).map((name) => newestSource(join(path, name))));
}

/**
 * Vitest global setup: builds the dashboard when its build is missing or older than its sources, so
 * the browser tests always drive the current UI (`npm run build:dashboard`, about a second).
 */
export default function buildDashboard(): void {
  const sources = ['src', 'index.html', 'vite.config.ts'].map((name) => join(DASHBOARD_DIR, name));
  const stale = !existsSync(DASHBOARD_INDEX) || Math.max(...sources.map(newestSource)) > statSync(DASHBOARD_INDEX).mtimeMs;
  if (!stale) return;
  execFileSync('npm', ['run', '--silent', 'build:dashboard'], { cwd: ROOT, stdio: ['ignore', 'ignore', 'inherit'] });
}
