/* boost-data --info: a shard's header after validating it (size, checksum,
 * tokens), as text or JSON. */
#include <cjson/cJSON.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data.h"
#include "data_tool.h"
#include "util.h"

int data_do_info(const char *path, bool json) {
  data_shard_info in;
  boost_status err = {0};
  if (data_shard_info_read(path, &in, &err) != 0) data_die(1, "%s", err.msg);
  bool boost = in.format == DATA_FORMAT_BOOST;
  char sum[32];
  snprintf(sum, sizeof sum, "%016" PRIx64, in.checksum);
  if (json) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "path", path);
    cJSON_AddStringToObject(o, "format", boost ? "boost" : "llm.c");
    cJSON_AddNumberToObject(o, "version", in.version);
    cJSON_AddNumberToObject(o, "header_bytes", in.header_bytes);
    cJSON_AddNumberToObject(o, "token_bytes", in.token_bytes);
    cJSON_AddNumberToObject(o, "vocab_size", in.vocab_size);
    cJSON_AddNumberToObject(o, "tokens", (double)in.num_tokens);
    cJSON_AddNumberToObject(o, "max_token", in.max_token);
    if (boost) {
      cJSON_AddNumberToObject(o, "documents", (double)in.num_documents);
      cJSON_AddStringToObject(o, "tokenizer", in.tokenizer);
      char th[32];
      snprintf(th, sizeof th, "%016" PRIx64, in.tokenizer_hash);
      if (in.tokenizer_hash)
        cJSON_AddStringToObject(o, "tokenizer_hash", th);
      else
        cJSON_AddNullToObject(o, "tokenizer_hash");
      if (in.eot_token == DATA_NO_EOT)
        cJSON_AddNullToObject(o, "eot_token");
      else
        cJSON_AddNumberToObject(o, "eot_token", in.eot_token);
      cJSON_AddStringToObject(o, "checksum_xxh3", sum);
    }
    cJSON_AddBoolToObject(o, "verified", 1);
    char *txt = cJSON_Print(o);
    printf("%s\n", txt);
    cJSON_free(txt);
    cJSON_Delete(o);
    return 0;
  }
  printf("file:         %s\n", path);
  if (boost)
    printf("format:       boost token shard v%" PRIu32 "\n", in.version);
  else
    printf("format:       llm.c .bin v%" PRIu32 " (%s)\n", in.version, in.token_bytes == 2 ? "GPT-2" : "LLaMA 3");
  printf("header_bytes: %" PRIu32 "\n", in.header_bytes);
  printf("token_bytes:  %" PRIu32 "\n", in.token_bytes);
  if (boost)
    printf("vocab_size:   %" PRIu32 "\n", in.vocab_size);
  else
    printf("vocab_size:   0 (not in llm.c headers; loader uses max token + 1 = %" PRIu64 ")\n",
           in.num_tokens ? (uint64_t)in.max_token + 1 : 0);
  printf("tokens:       %" PRIu64 "\n", in.num_tokens);
  printf("max_token:    %" PRIu32 "\n", in.max_token);
  if (boost) {
    printf("documents:    %" PRIu64 "\n", in.num_documents);
    printf("tokenizer:    %s\n", in.tokenizer[0] ? in.tokenizer : "(none)");
    if (in.tokenizer_hash) printf("tokenizer_hash: %016" PRIx64 "\n", in.tokenizer_hash);
    if (in.eot_token == DATA_NO_EOT)
      printf("eot_token:    (none)\n");
    else
      printf("eot_token:    %" PRIu32 "\n", in.eot_token);
    printf("checksum:     xxh3-64 %s (verified)\n", sum);
  } else {
    printf("checksum:     (none in llm.c format; size and header verified)\n");
  }
  return 0;
}
