/* volt/distilbert_hf.h — a Hugging Face DistilBERT folder's settings (config.json,
 * tokenizer_config.json), so any DistilBERT shape loads with its own tokenizer casing. */
#ifndef VOLT_DISTILBERT_HF_H
#define VOLT_DISTILBERT_HF_H

#include "volt/export.h"
#include <stdbool.h>
#include <stddef.h>
#include "volt/distilbert.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Set cfg's architecture from <dir>/config.json: dim, n_layers, n_heads, hidden_dim,
 * vocab_size, max_position_embeddings, dropout, attention_dropout, seq_classif_dropout,
 * initializer_range, pad_token_id (absent keys keep cfg's values). "activation" must be
 * "gelu" (the only one DistilBERT's blocks use here) and "model_type", when given,
 * "distilbert". *do_lower_case (if not NULL) gets tokenizer_config.json's do_lower_case,
 * true when the file or the key is absent. Errors: IO (no config.json), CORRUPT (not JSON,
 * a key of the wrong type or range), UNSUPPORTED (activation, model_type); err says which
 * file and key. */
VOLT_API volt_status volt_distilbert_config_from_hf(volt_distilbert_config *cfg, const char *dir, bool *do_lower_case,
                                           char *err, size_t errlen);

/* <dir>/tokenizer_config.json as Hugging Face's BertTokenizer reads it: *do_lower_case gets
 * do_lower_case (true when the file or the key is absent); *strip_accents gets strip_accents:
 * 1 true, 0 false, -1 when absent or null (BertTokenizer's None: strip accents exactly when
 * lowercasing). Errors: INVALID_ARG (NULL), IO (a file there that cannot be read, a FIFO),
 * CORRUPT (not a JSON object, a key of the wrong type); err says which file and key. */
VOLT_API volt_status volt_distilbert_tokenizer_from_hf(const char *dir, bool *do_lower_case, int *strip_accents,
                                                       char *err, size_t errlen);

/* Write a Hugging Face DistilBERT folder's config.json (and, when vocab_txt is not NULL, its
 * vocab.txt, copied, and tokenizer_config.json with do_lower_case and strip_accents null)
 * into the existing folder dir, so that the folder with a model.safetensors of the model's
 * weights (volt_trainer_export_full) is what transformers'
 * DistilBertForSequenceClassification.from_pretrained and
 * volt_distilbert_config_from_hf / --pretrained read: model_type "distilbert", architectures
 * ["DistilBertForSequenceClassification"], vocab_size, max_position_embeddings, dim, n_layers,
 * n_heads, hidden_dim, dropout, attention_dropout, seq_classif_dropout, initializer_range,
 * pad_token_id (null for -1), activation "gelu", sinusoidal_pos_embds false, and the class
 * count as id2label / label2id ("LABEL_<i>", transformers' default names). Each file is
 * written whole or not at all (a temporary file renamed); files already there are replaced.
 * Errors: INVALID_ARG (NULL, a config volt_distilbert_create would refuse or config_from_hf would
 * not read back: its ranges are narrower), IO (with err). */
VOLT_API volt_status volt_distilbert_config_to_hf(const volt_distilbert_config *cfg, const char *dir, const char *vocab_txt,
                                                  bool do_lower_case, char *err, size_t errlen);
/* As volt_distilbert_config_to_hf, with tokenizer_config.json's strip_accents: -1 writes null
 * (follow do_lower_case; what volt_distilbert_config_to_hf writes), 0 false, 1 true. */
VOLT_API volt_status volt_distilbert_config_to_hf_ex(const volt_distilbert_config *cfg, const char *dir, const char *vocab_txt,
                                                     bool do_lower_case, int strip_accents, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif
