/**
 * `npm run lint:readmes` (part of `npm run lint` and of `npm test`'s lint phase): a folder's README
 * names everything directly in that folder, so a newcomer reading it is never missing a file.
 *
 * The rule, for every README.md in the repository except the top-level one (which describes the
 * project, not a folder): each file directly in the README's folder is named in it by its full file
 * name (`charge-batcher.ts`, `index.sql`), and each subfolder by its name and a slash (`queues/`).
 * Names starting with a dot are left out. A name counts only as a whole name: `usage.ts` is not
 * named by `usage.ts.bak` or `my-usage.ts`, but is by `queues/usage.ts` or `[usage.ts](usage.ts)`.
 * So docs/decisions/README.md, the index of decision records, must list every record.
 *
 * Files are what git tracks or would track (untracked files not ignored count too, so a new file
 * fails here before it is committed).
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { basename, dirname } from 'node:path';

const root = execFileSync('git', ['rev-parse', '--show-toplevel'], { encoding: 'utf8' }).trim();
const listed = (...args: string[]) =>
  execFileSync('git', ['ls-files', '-z', ...args], { cwd: root, encoding: 'utf8' })
    .split('\0')
    .filter((file) => file !== '');
// Deleted in the working tree but still in the index: gone for a reader, so not asked for.
const deleted = new Set(listed('--deleted'));
const files = listed('--cached', '--others', '--exclude-standard').filter((file) => !deleted.has(file));

/** Everything directly in `folder`: files by name, subfolders by name plus "/". */
function entriesOf(folder: string): Set<string> {
  const entries = new Set<string>();
  for (const file of files) {
    if (!file.startsWith(`${folder}/`)) continue;
    const [first, ...rest] = file.slice(folder.length + 1).split('/');
    if (!first || first.startsWith('.') || (rest.length === 0 && first === 'README.md')) continue;
    entries.add(rest.length > 0 ? `${first}/` : first);
  }
  return entries;
}

const escape = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
const named = (text: string, entry: string) =>
  new RegExp(`(^|[^A-Za-z0-9_.-])${escape(entry)}${entry.endsWith('/') ? '' : '(?![A-Za-z0-9_-])'}`, 'm').test(text);

const problems: string[] = [];
for (const readme of files.filter((file) => basename(file) === 'README.md' && file !== 'README.md').sort()) {
  const text = readFileSync(`${root}/${readme}`, 'utf8');
  const missing = [...entriesOf(dirname(readme))].filter((entry) => !named(text, entry)).sort();
  if (missing.length > 0) problems.push(`${readme} does not name: ${missing.join(', ')}`);
}

if (problems.length > 0) {
  process.stderr.write(
    `${problems.join('\n')}\n\nEach README.md names every file (by file name) and subfolder (name + "/") directly in its folder; ` +
      'add a line saying what each one is (rule: scripts/check-readmes.ts).\n',
  );
  process.exit(1);
}
