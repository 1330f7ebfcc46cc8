/* The model presets (docs/MODEL.md): the shapes model.preset names. */
#include <stdio.h>
#include <string.h>

#include "config.h"

typedef struct {
  const char *name;
  int vocab, d, layers, heads, ffn, rank, seq;
  int lowrank;
} preset_spec;

static const preset_spec PRESETS[] = {
    {"tiny", 320, 64, 4, 4, 176, 16, 64, 1},
    {"cola-60m", 32000, 512, 8, 8, 1376, 128, 256, 1},
    {"cola-130m", 32000, 768, 12, 12, 2048, 256, 256, 1},
    {"cola-350m", 32000, 1024, 24, 16, 2736, 256, 256, 1},
    {"cola-1b", 32000, 2048, 24, 32, 5472, 512, 256, 1},
    {"cola-7b", 32000, 4096, 32, 32, 11008, 1024, 256, 1},
    {"llama-tiny", 320, 64, 4, 4, 176, 16, 64, 0},
    {"llama-60m", 32000, 512, 8, 8, 1376, 128, 256, 0},
    {"llama-130m", 32000, 768, 12, 12, 2048, 256, 256, 0},
    {"llama-350m", 32000, 1024, 24, 16, 2736, 256, 256, 0},
    {"llama-1b", 32000, 2048, 24, 32, 5472, 512, 256, 0},
    {"llama-7b", 32000, 4096, 32, 32, 11008, 1024, 256, 0},
};
#define NPRESETS ((int)(sizeof PRESETS / sizeof PRESETS[0]))


int config_apply_preset(model_config *m, const char *name) {
  for (int i = 0; i < NPRESETS; i++) {
    const preset_spec *p = &PRESETS[i];
    if (strcmp(p->name, name) != 0) continue;
    snprintf(m->preset, sizeof m->preset, "%s", name);
    m->vocab = p->vocab;
    m->d_model = p->d;
    m->n_layers = p->layers;
    m->n_heads = p->heads;
    m->ffn = p->ffn;
    m->rank_attn = m->rank_mlp = p->rank;
    m->seq_len = p->seq;
    snprintf(m->lowrank, sizeof m->lowrank, "%s", p->lowrank ? "all" : "none");
    return 0;
  }
  return -1;
}

void config_preset_names(char *out, size_t outlen) {
  out[0] = '\0';
  for (int i = 0; i < NPRESETS; i++) {
    strncat(out, PRESETS[i].name, outlen - strlen(out) - 1);
    if (i + 1 < NPRESETS) strncat(out, ", ", outlen - strlen(out) - 1);
  }
}
