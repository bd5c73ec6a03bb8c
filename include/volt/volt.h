/* volt/volt.h — the umbrella header. */
#ifndef VOLT_VOLT_H
#define VOLT_VOLT_H
#include "volt/version.h"
#include "volt/core.h"
#include "volt/dtype.h"
#include "volt/ops.h"
#include "volt/params.h"
#include "volt/optim.h"
#include "volt/data.h"
#include "volt/trainer.h"
#include "volt/tokenizer.h"
#include "volt/text.h"
#include "volt/safetensors.h"
#include "volt/distilbert.h"
#include "volt/models.h"
#include "volt/nn.h"
#include "volt/cli.h"
#endif
