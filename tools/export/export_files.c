/* boost-export: the small files of a Hugging Face model folder.
 * config.json (LlamaForCausalLM, or ColaForCausalLM through auto_map and
 * the remote code embedded from tools/export/hf/), generation_config.json, the
 * tokenizer (byte-v1 as a `tokenizers` byte-level BPE with no merges whose
 * ids are the byte values; GPT-2 BPE is the standard tokenizer, named in
 * README.md) and a README.md that says where the weights came from. */
#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bpe.h"
#include "check.h"
#include "export.h"
#include "util.h"

#define EOT_TEXT "<|endoftext|>"

/* The shortest decimal that reads back as the same float (1e-05, not
 * 9.99999974737875e-06). */
static double short_float(float f) {
  char buf[32];
  for (int prec = 6; prec <= 9; prec++) {
    snprintf(buf, sizeof buf, "%.*g", prec, (double)f);
    if ((float)strtod(buf, NULL) == f) break;
  }
  return strtod(buf, NULL);
}

static int write_json(const char *dir, const char *name, cJSON *o, boost_status *err) {
  char *text = o ? cJSON_Print(o) : NULL;
  cJSON_Delete(o);
  if (!text) return boost_err(err, "out of memory");
  const size_t n = strlen(text);
  char *nl = realloc(text, n + 2);
  if (!nl) {
    free(text);
    return boost_err(err, "out of memory");
  }
  nl[n] = '\n';
  nl[n + 1] = 0;
  const int rc = exp_write_file(dir, name, nl, n + 1, err);
  free(nl);
  return rc;
}

static void add_token_ids(const exp_plan *p, cJSON *o) {
  if (p->eot < 0) return;
  cJSON_AddNumberToObject(o, "bos_token_id", p->eot);
  cJSON_AddNumberToObject(o, "eos_token_id", p->eot);
}

static void add_provenance(const ckr_ckpt *c, cJSON *o) {
  cJSON *b = cJSON_AddObjectToObject(o, "boost_checkpoint");
  cJSON_AddStringToObject(b, "path", c->path);
  if (c->meta.run.step >= 0) cJSON_AddNumberToObject(b, "step", (double)c->meta.run.step);
  if (c->meta.run.tokens_seen >= 0) cJSON_AddNumberToObject(b, "tokens_seen", c->meta.run.tokens_seen);
  const char *v = ckpt_meta_str(&c->meta, CKPT_META_F_software_version);
  if (v) cJSON_AddStringToObject(b, "software_version", v);
}

static cJSON *model_config_json(const exp_plan *p, const ckr_ckpt *c) {
  const model_config *m = &p->m;
  cJSON *o = cJSON_CreateObject(), *arch = cJSON_AddArrayToObject(o, "architectures");
  const int cola = p->kind == EXP_COLA;
  cJSON_AddItemToArray(arch, cJSON_CreateString(cola ? "ColaForCausalLM" : "LlamaForCausalLM"));
  cJSON_AddStringToObject(o, "model_type", cola ? "cola" : "llama");
  if (cola) {
    cJSON *am = cJSON_AddObjectToObject(o, "auto_map");
    cJSON_AddStringToObject(am, "AutoConfig", "configuration_cola.ColaConfig");
    cJSON_AddStringToObject(am, "AutoModelForCausalLM", "modeling_cola.ColaForCausalLM");
  }
  cJSON_AddNumberToObject(o, "vocab_size", m->vocab);
  cJSON_AddNumberToObject(o, "hidden_size", m->d_model);
  cJSON_AddNumberToObject(o, "intermediate_size", m->ffn);
  cJSON_AddNumberToObject(o, "num_hidden_layers", m->n_layers);
  cJSON_AddNumberToObject(o, "num_attention_heads", m->n_heads);
  cJSON_AddNumberToObject(o, "num_key_value_heads", m->n_heads);
  cJSON_AddStringToObject(o, "hidden_act", "silu");
  cJSON_AddNumberToObject(o, "max_position_embeddings", m->seq_len);
  cJSON_AddNumberToObject(o, "rms_norm_eps", short_float(m->norm_eps));
  cJSON_AddNumberToObject(o, "rope_theta", short_float(m->rope_theta));
  cJSON_AddNumberToObject(o, "initializer_range", short_float(m->init_std));
  cJSON_AddBoolToObject(o, "tie_word_embeddings", m->tie_embeddings != 0);
  cJSON_AddBoolToObject(o, "attention_bias", 0);
  cJSON_AddBoolToObject(o, "mlp_bias", 0);
  cJSON_AddBoolToObject(o, "use_cache", 1);
  if (cola) {
    cJSON_AddNumberToObject(o, "rank_attn", m->rank_attn);
    cJSON_AddNumberToObject(o, "rank_mlp", m->rank_mlp);
    cJSON *lr = cJSON_AddArrayToObject(o, "lowrank");
    for (int k = 0; k < PROJ_COUNT; k++)
      if (model_is_lowrank(m, (proj_kind)k)) cJSON_AddItemToArray(lr, cJSON_CreateString(proj_names[k]));
  }
  cJSON_AddStringToObject(o, "torch_dtype", p->dtype == EXP_BF16 ? "bfloat16" : "float32");
  add_token_ids(p, o);
  add_provenance(c, o);
  return o;
}

/* GPT-2's byte-to-character table (printable Latin-1 maps to itself, the
 * other bytes to U+0100 onwards in byte order), the alphabet of every
 * byte-level tokenizer in `tokenizers`. */
static void byte_char(int b, char *out) {
  int cp = b, extra = 0;
  const int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
  if (!printable) {
    for (int x = 0; x < b; x++) extra += !((x >= '!' && x <= '~') || (x >= 0xA1 && x <= 0xAC) || (x >= 0xAE && x <= 0xFF));
    cp = 256 + extra;
  }
  if (cp < 0x80) {
    out[0] = (char)cp;
    out[1] = 0;
  } else {
    out[0] = (char)(0xC0 | (cp >> 6));
    out[1] = (char)(0x80 | (cp & 0x3F));
    out[2] = 0;
  }
}

static cJSON *byte_level(void) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "type", "ByteLevel");
  cJSON_AddBoolToObject(o, "add_prefix_space", 0);
  cJSON_AddBoolToObject(o, "trim_offsets", 0);
  cJSON_AddBoolToObject(o, "use_regex", 0);
  return o;
}

/* What every tokenizer.json boost writes begins with: the format's version,
 * no truncation or padding, the end-of-text token as the one added token,
 * no normalizer. */
static cJSON *tokenizer_json_head(const exp_plan *p) {
  cJSON *o = cJSON_CreateObject(), *added = cJSON_AddArrayToObject(o, "added_tokens"), *t = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "version", "1.0");
  cJSON_AddNullToObject(o, "truncation");
  cJSON_AddNullToObject(o, "padding");
  cJSON_AddNumberToObject(t, "id", p->eot);
  cJSON_AddStringToObject(t, "content", EOT_TEXT);
  cJSON_AddBoolToObject(t, "single_word", 0);
  cJSON_AddBoolToObject(t, "lstrip", 0);
  cJSON_AddBoolToObject(t, "rstrip", 0);
  cJSON_AddBoolToObject(t, "normalized", 0);
  cJSON_AddBoolToObject(t, "special", 1);
  cJSON_AddItemToArray(added, t);
  cJSON_AddNullToObject(o, "normalizer");
  return o;
}

/* byte-v1 (docs/DATA_FORMAT.md): token = byte value, EOT = 256. */
static int write_byte_tokenizer(const exp_plan *p, const char *dir, boost_status *err) {
  cJSON *o = tokenizer_json_head(p);
  cJSON_AddItemToObject(o, "pre_tokenizer", byte_level());
  cJSON_AddNullToObject(o, "post_processor");
  cJSON_AddItemToObject(o, "decoder", byte_level());
  cJSON *model = cJSON_AddObjectToObject(o, "model"), *vocab;
  cJSON_AddStringToObject(model, "type", "BPE");
  cJSON_AddNullToObject(model, "unk_token");
  cJSON_AddBoolToObject(model, "fuse_unk", 0);
  cJSON_AddBoolToObject(model, "byte_fallback", 0);
  vocab = cJSON_AddObjectToObject(model, "vocab");
  for (int b = 0; b < 256; b++) {
    char ch[4];
    byte_char(b, ch);
    cJSON_AddNumberToObject(vocab, ch, b);
  }
  cJSON_AddNumberToObject(vocab, EOT_TEXT, p->eot);
  cJSON_AddArrayToObject(model, "merges");
  if (write_json(dir, "tokenizer.json", o, err) != 0) return -1;
  cJSON *tc = cJSON_CreateObject();
  cJSON_AddStringToObject(tc, "tokenizer_class", "PreTrainedTokenizerFast");
  cJSON_AddStringToObject(tc, "bos_token", EOT_TEXT);
  cJSON_AddStringToObject(tc, "eos_token", EOT_TEXT);
  cJSON_AddNumberToObject(tc, "model_max_length", p->m.seq_len);
  cJSON_AddBoolToObject(tc, "clean_up_tokenization_spaces", 0);
  return write_json(dir, "tokenizer_config.json", tc, err);
}

/* A token's bytes through byte_char (the form vocab.json and merges.txt
 * spell tokens in) into out (6 bytes per byte at most, NUL-terminated). */
static void token_chars(const uint8_t *b, size_t n, char *out) {
  for (size_t i = 0; i < n; i++) {
    byte_char(b[i], out);
    out += strlen(out);
  }
  *out = 0;
}

/* tokenizer.json for a BPE whose pre-tokenizer is not GPT-2's (which
 * GPT2Tokenizer hard-codes): a regex Split, then the byte-level alphabet, the
 * same vocabulary and merges. cl100k's and llama3's patterns split text
 * alike (tests/cli/bpe_tiktoken.sh gives both the same tokens); the file
 * spells Llama 3's, which has no possessive quantifiers (the `tokenizers`
 * regex engine reads {1,3}+ otherwise). */
static int write_split_tokenizer(const exp_plan *p, const char *dir, cJSON *vocab, cJSON *merges, boost_status *err) {
  cJSON *o = tokenizer_json_head(p);
  cJSON *pre = cJSON_AddObjectToObject(o, "pre_tokenizer"), *seq = cJSON_AddArrayToObject(pre, "pretokenizers");
  cJSON_AddStringToObject(pre, "type", "Sequence");
  cJSON *split = cJSON_CreateObject();
  cJSON_AddStringToObject(split, "type", "Split");
  cJSON_AddStringToObject(cJSON_AddObjectToObject(split, "pattern"), "Regex", bpe_pretokenizer_pattern("llama3"));
  cJSON_AddStringToObject(split, "behavior", "Isolated");
  cJSON_AddBoolToObject(split, "invert", 0);
  cJSON_AddItemToArray(seq, split);
  cJSON_AddItemToArray(seq, byte_level());
  cJSON_AddNullToObject(o, "post_processor");
  cJSON_AddItemToObject(o, "decoder", byte_level());
  cJSON *model = cJSON_AddObjectToObject(o, "model");
  cJSON_AddStringToObject(model, "type", "BPE");
  cJSON_AddNullToObject(model, "unk_token");
  cJSON_AddBoolToObject(model, "fuse_unk", 0);
  cJSON_AddBoolToObject(model, "byte_fallback", 0);
  cJSON_AddBoolToObject(model, "ignore_merges", 1); /* a piece that is a token is that token, as in tiktoken */
  cJSON_AddItemToObject(model, "vocab", vocab);
  cJSON_AddItemToObject(model, "merges", merges);
  return write_json(dir, "tokenizer.json", o, err);
}

/* A BPE tokenizer over a tiktoken rank file (bpe.h) as GPT-2's files:
 * vocab.json (every rank and <|endoftext|>), merges.txt (per token the
 * merge that makes it, recovered from the ranks: bpe_last_merge, in rank
 * order, as GPT-2's own file lists them) and tokenizer_config.json; for the
 * cl100k and llama3 pre-tokenizers also tokenizer.json, which
 * AutoTokenizer then reads. */
static int write_bpe_tokenizer(const exp_plan *p, const char *dir, boost_status *err) {
  const bpe_tokenizer *t = p->bpe;
  const int32_t n = (int32_t)bpe_vocab_size(t);
  const int split = !strcmp(bpe_name(t), "bpe-cl100k") || !strcmp(bpe_name(t), "bpe-llama3");
  cJSON *vocab = cJSON_CreateObject(), *merge_list = split ? cJSON_CreateArray() : NULL;
  size_t cap = 1 << 20, used = 0;
  char *merges = boost_realloc(NULL, cap, 1), *a = boost_calloc(2048, 1), *b = boost_calloc(2048, 1);
  used += (size_t)snprintf(merges, cap, "#version: 0.2\n");
  for (int32_t id = 0; id < n; id++) {
    size_t len = 0, split;
    const uint8_t *bytes = bpe_token_bytes(t, id, &len);
    if (!bytes || len > 255) continue;
    if (id == p->eot) {
      cJSON_AddNumberToObject(vocab, EOT_TEXT, id);
      continue;
    }
    token_chars(bytes, len, a);
    cJSON_AddNumberToObject(vocab, a, id);
    if (bpe_last_merge(t, id, &split) != 0) continue;
    token_chars(bytes, split, a);
    token_chars(bytes + split, len - split, b);
    if (used + strlen(a) + strlen(b) + 3 > cap) merges = boost_realloc(merges, cap *= 2, 1);
    const size_t line = used;
    used += (size_t)snprintf(merges + used, cap - used, "%s %s\n", a, b);
    if (merge_list) {
      merges[used - 1] = 0;
      cJSON_AddItemToArray(merge_list, cJSON_CreateString(merges + line));
      merges[used - 1] = '\n';
    }
  }
  boost_free(a);
  boost_free(b);
  cJSON *vocab2 = split ? cJSON_Duplicate(vocab, 1) : NULL;
  int rc = write_json(dir, "vocab.json", vocab, err);
  if (rc == 0) rc = exp_write_file(dir, "merges.txt", merges, used, err);
  free(merges);
  if (split && rc == 0) {
    rc = write_split_tokenizer(p, dir, vocab2, merge_list, err);
  } else {
    cJSON_Delete(vocab2);
    cJSON_Delete(merge_list);
  }
  if (rc != 0) return -1;
  cJSON *tc = cJSON_CreateObject();
  cJSON_AddStringToObject(tc, "tokenizer_class", split ? "PreTrainedTokenizerFast" : "GPT2Tokenizer");
  cJSON_AddStringToObject(tc, "bos_token", EOT_TEXT);
  cJSON_AddStringToObject(tc, "eos_token", EOT_TEXT);
  cJSON_AddStringToObject(tc, "unk_token", EOT_TEXT);
  cJSON_AddBoolToObject(tc, "add_prefix_space", 0);
  cJSON_AddNumberToObject(tc, "model_max_length", p->m.seq_len);
  cJSON_AddBoolToObject(tc, "clean_up_tokenization_spaces", 0);
  return write_json(dir, "tokenizer_config.json", tc, err);
}

static const char *tokenizer_note(const exp_plan *p) {
  switch (p->tokenizer) {
  case TOK_BYTE:
    return "byte-v1 (token = byte value, 256 = <|endoftext|>, written before every document): tokenizer.json here";
  case TOK_GPT2:
    return "GPT-2 BPE (llm.c shards): the standard files, AutoTokenizer.from_pretrained(\"openai-community/gpt2\")";
  case TOK_BPE:
    return "BPE over the run's tiktoken rank file (<|endoftext|> before every document): vocab.json and merges.txt "
           "here, derived from the ranks";
  default:
    return "unknown (the training shard was not found or names no tokenizer): none exported";
  }
}

static int write_readme(const exp_plan *p, const ckr_ckpt *c, const char *dir, boost_status *err) {
  char text[8192];
  const int cola = p->kind == EXP_COLA;
  snprintf(text, sizeof text,
           "# %s exported by boost-export\n\n"
           "- source checkpoint: `%s` (step %lld)\n"
           "- architecture: %s\n"
           "- weights: %s, %d tensors, %.0f parameters\n"
           "- tokenizer: %s\n\n"
           "```python\n"
           "from transformers import AutoModelForCausalLM\n"
           "model = AutoModelForCausalLM.from_pretrained(\"DIR\"%s)\n"
           "```\n",
           cola ? "A CoLA (low-rank) model" : "A LLaMA model", c->path, (long long)c->meta.run.step,
           cola ? "ColaForCausalLM, remote code in configuration_cola.py and modeling_cola.py (load with "
                  "trust_remote_code=True)"
                : "LlamaForCausalLM (q and k rows permuted from boost's interleaved RoPE to rotate-half)",
           p->dtype == EXP_BF16 ? "bfloat16" : "float32", p->n, p->parameters, tokenizer_note(p),
           cola ? ", trust_remote_code=True" : "");
  return exp_write_file(dir, "README.md", text, strlen(text), err);
}

int exp_write_files(const exp_plan *p, const ckr_ckpt *c, const char *dir, boost_status *err) {
  if (write_json(dir, "config.json", model_config_json(p, c), err) != 0) return -1;
  cJSON *g = cJSON_CreateObject();
  add_token_ids(p, g);
  if (write_json(dir, "generation_config.json", g, err) != 0) return -1;
  if (p->tokenizer == TOK_BYTE && write_byte_tokenizer(p, dir, err) != 0) return -1;
  if (p->tokenizer == TOK_BPE && write_bpe_tokenizer(p, dir, err) != 0) return -1;
  for (int i = 0; p->kind == EXP_COLA && i < exp_hf_nfiles; i++)
    if (exp_write_file(dir, exp_hf_files[i].name, exp_hf_files[i].data, exp_hf_files[i].size, err) != 0)
      return -1;
  return write_readme(p, c, dir, err);
}
