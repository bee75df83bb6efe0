// Deprecated: include "idem/crash/harness.h".
#include "idem/crash/harness.h"
