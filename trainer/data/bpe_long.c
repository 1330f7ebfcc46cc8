/* The merge loop for long pieces (a run of thousands of letters or digits
 * the pre-tokenizer keeps whole): the same merges as merge_piece in
 * bpe_encode.c -- the lowest rank first, the leftmost of equals -- from a
 * heap of adjacent pairs keyed (rank, position) over a linked list of
 * parts, O(n log n) where the scan is O(n^2). Stale heap entries (a part
 * that grew or went) are recognised by the parts' versions and skipped. */
#include <stdlib.h>

#include "bpe_internal.h"
#include "check.h"

typedef struct {
  uint32_t rank;
  uint32_t vl, vr; /* versions of the two parts when pushed */
  size_t left, right;
} pair_entry;

typedef struct {
  pair_entry *v;
  size_t n, cap;
} pair_heap;

static int before(const pair_entry *a, const pair_entry *b) {
  return a->rank != b->rank ? a->rank < b->rank : a->left < b->left;
}

static void heap_push(pair_heap *h, pair_entry e) {
  if (h->n == h->cap) {
    h->cap = h->cap ? 2 * h->cap : 256;
    h->v = boost_realloc(h->v, h->cap, sizeof *h->v);
  }
  size_t i = h->n++;
  while (i > 0 && before(&e, &h->v[(i - 1) / 2])) {
    h->v[i] = h->v[(i - 1) / 2];
    i = (i - 1) / 2;
  }
  h->v[i] = e;
}

static pair_entry heap_pop(pair_heap *h) {
  pair_entry top = h->v[0], last = h->v[--h->n];
  size_t i = 0;
  for (;;) {
    size_t c = 2 * i + 1;
    if (c >= h->n) break;
    if (c + 1 < h->n && before(&h->v[c + 1], &h->v[c])) c++;
    if (!before(&h->v[c], &last)) break;
    h->v[i] = h->v[c];
    i = c;
  }
  if (h->n) h->v[i] = last;
  return top;
}

void bpe_merge_long(const bpe_tokenizer *t, const uint8_t *p, size_t n, bpe_tokens *out) {
  /* Part k starts at byte k while alive; next[k] is the next part's start
   * (n: the end). */
  size_t *next = boost_realloc(NULL, n, sizeof *next), *prev = boost_realloc(NULL, n, sizeof *prev);
  uint32_t *ver = boost_calloc(n, sizeof *ver);
  pair_heap h = {0};
  for (size_t k = 0; k < n; k++) {
    next[k] = k + 1;
    prev[k] = k ? k - 1 : SIZE_MAX;
  }
  for (size_t k = 0; k + 1 < n; k++) {
    uint32_t r = bpe_lookup(t, p + k, 2);
    if (r != BPE_NO_RANK) heap_push(&h, (pair_entry){r, 0, 0, k, k + 1});
  }
  while (h.n) {
    pair_entry e = heap_pop(&h);
    const size_t i = e.left, j = e.right;
    if (ver[i] != e.vl || next[i] != j || j >= n || ver[j] != e.vr) continue; /* stale */
    /* Part i swallows part j. */
    next[i] = next[j];
    if (next[i] < n) prev[next[i]] = i;
    ver[i]++;
    ver[j] = UINT32_MAX; /* gone: no entry matches it again */
    if (next[i] < n) {
      uint32_t r = bpe_lookup(t, p + i, next[next[i]] - i);
      if (r != BPE_NO_RANK) heap_push(&h, (pair_entry){r, ver[i], ver[next[i]], i, next[i]});
    }
    if (prev[i] != SIZE_MAX) {
      size_t a = prev[i];
      uint32_t r = bpe_lookup(t, p + a, next[i] - a);
      if (r != BPE_NO_RANK) heap_push(&h, (pair_entry){r, ver[a], ver[i], a, i});
    }
  }
  for (size_t k = 0; k < n; k = next[k]) {
    uint32_t r = bpe_lookup(t, p + k, next[k] - k);
    BOOST_ASSERT(r != BPE_NO_RANK);
    bpe_tokens_push(out, (int32_t)r);
  }
  free(h.v);
  free(next);
  free(prev);
  boost_free(ver);
}
