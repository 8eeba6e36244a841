import { getCookbookWithVersion, type Cookbook } from '#db/cookbooks';
import type { Db } from '#db/sql';

const MAX_ENTRIES = 1_000;

/**
 * Cookbook definitions cached in process. A cookbook can change (re-seeding updates its row and its
 * `updated_at`), so an entry is used only when its version matches the one the caller read along
 * with the session row in the same round trip: a changed cookbook is read afresh on its next use, on
 * every instance at once, with no TTL and no announcement to miss. Callers must not change what they get.
 */
export class CookbookCache {
  private readonly entries = new Map<string, { version: string; cookbook: Cookbook }>();

  constructor(private readonly db: Db) {}

  /** The cookbook as of `version` or newer; null when it does not exist. */
  async get(id: string, version: string | null): Promise<Cookbook | null> {
    const hit = this.entries.get(id);
    if (hit && hit.version === version) return hit.cookbook;
    const found = await getCookbookWithVersion(this.db, id);
    if (!found) return null;
    if (this.entries.size >= MAX_ENTRIES) this.entries.clear();
    this.entries.set(id, found);
    return found.cookbook;
  }
}
