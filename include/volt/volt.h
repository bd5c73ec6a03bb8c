/* volt/volt.h — the umbrella header. */
#ifndef VOLT_VOLT_H
#define VOLT_VOLT_H
#include "volt/core.h"
#include "volt/ops.h"
#include "volt/params.h"
#include "volt/optim.h"
#endif
