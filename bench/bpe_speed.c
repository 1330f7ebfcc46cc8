/* BPE encoding speed for bench/bench_bpe.sh: reads one text file, cuts it
 * into documents at "\n%\n" (fortune separators: the same cut the bench's
 * tiktoken side makes), encodes them all with bpe_encode_batch over
 * THREADS threads REPEAT times and prints the fastest pass as one JSON line:
 * bytes, documents, tokens, seconds, MB/s. Loading the rank file and
 * reading the text are not timed (nor are they on tiktoken's side).
 *   bpe-speed RANKS PRETOKENIZER THREADS REPEAT TEXT */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bpe.h"
#include "check.h"
#include "util.h"

int main(int argc, char **argv) {
  if (argc != 6) {
    fprintf(stderr, "usage: bpe-speed RANKS PRETOKENIZER THREADS REPEAT TEXT\n");
    return 2;
  }
  const int threads = atoi(argv[3]), repeat = atoi(argv[4]);
  boost_status err = {0};
  bpe_tokenizer *t = NULL;
  if (bpe_open(argv[1], argv[2], NULL, &t, &err) != 0) {
    fprintf(stderr, "bpe-speed: %s\n", err.msg);
    return 1;
  }
  FILE *f = fopen(argv[5], "rb");
  if (!f) {
    fprintf(stderr, "bpe-speed: cannot open %s\n", argv[5]);
    return 1;
  }
  fseek(f, 0, SEEK_END);
  const size_t n = (size_t)ftell(f);
  fseek(f, 0, SEEK_SET);
  char *text = boost_calloc(n + 1, 1);
  if (fread(text, 1, n, f) != n) return 1;
  fclose(f);
  size_t ndocs = 0, cap = 1024;
  const uint8_t **docs = boost_realloc(NULL, cap, sizeof *docs);
  size_t *lens = boost_realloc(NULL, cap, sizeof *lens);
  for (char *p = text;;) {
    char *sep = strstr(p, "\n%\n");
    if (ndocs == cap) {
      cap *= 2;
      docs = boost_realloc(docs, cap, sizeof *docs);
      lens = boost_realloc(lens, cap, sizeof *lens);
    }
    docs[ndocs] = (const uint8_t *)p;
    lens[ndocs++] = sep ? (size_t)(sep - p) : strlen(p);
    if (!sep) break;
    p = sep + 3;
  }
  double best = 1e30;
  size_t tokens = 0;
  for (int r = 0; r < repeat; r++) {
    bpe_tokens *out = boost_calloc(ndocs, sizeof *out);
    const double t0 = boost_now_s();
    if (bpe_encode_batch(t, ndocs, docs, lens, out, threads, &err) != 0) {
      fprintf(stderr, "bpe-speed: %s\n", err.msg);
      return 1;
    }
    const double s = boost_now_s() - t0;
    if (s < best) best = s;
    tokens = 0;
    for (size_t i = 0; i < ndocs; i++) {
      tokens += out[i].n;
      bpe_tokens_free(&out[i]);
    }
    boost_free(out);
  }
  printf("{\"bytes\": %zu, \"documents\": %zu, \"tokens\": %zu, \"seconds\": %.4f, \"mb_per_s\": %.2f}\n", n, ndocs,
         tokens, best, (double)n / 1e6 / best);
  free(docs);
  free(lens);
  boost_free(text);
  bpe_close(t);
  return 0;
}
