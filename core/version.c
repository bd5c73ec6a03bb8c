/* The linked library's version (volt/version.h). */
#include "volt/version.h"

const char *volt_version(void) { return VOLT_VERSION_STRING; }

unsigned volt_version_number(void) { return VOLT_VERSION_NUMBER; }
