import type { IndexedApi, IndexHit } from './index-types.js';

/** Best first, then by id (the order of the SQL ranking: score desc, id). */
export const better = (a: IndexHit, b: IndexHit) => a.score > b.score || (a.score === b.score && a.api.id < b.api.id);

/** The best `limit` hits of a stream (a bounded min-heap), without sorting every candidate. */
export class TopHits {
  private readonly heap: IndexHit[] = [];
  constructor(private readonly limit: number) {}

  offer(api: IndexedApi, score: number, coverage: number): void {
    const heap = this.heap;
    if (this.limit <= 0) return;
    if (heap.length < this.limit) {
      heap.push({ api, score, coverage });
      let at = heap.length - 1;
      while (at > 0) {
        const parent = (at - 1) >> 1;
        if (!better(heap[parent]!, heap[at]!)) break;
        [heap[parent], heap[at]] = [heap[at]!, heap[parent]!];
        at = parent;
      }
      return;
    }
    // Most candidates lose to the worst kept hit: compared before a hit is made for them.
    const worst = heap[0]!;
    if (!(score > worst.score || (score === worst.score && api.id < worst.api.id))) return;
    heap[0] = { api, score, coverage };
    let at = 0;
    for (;;) {
      const left = 2 * at + 1;
      const right = left + 1;
      let worst = at;
      if (left < heap.length && better(heap[worst]!, heap[left]!)) worst = left;
      if (right < heap.length && better(heap[worst]!, heap[right]!)) worst = right;
      if (worst === at) break;
      [heap[worst], heap[at]] = [heap[at]!, heap[worst]!];
      at = worst;
    }
  }

  sorted(): IndexHit[] {
    return [...this.heap].sort((a, b) => (better(a, b) ? -1 : better(b, a) ? 1 : 0));
  }
}
