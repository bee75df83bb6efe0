// Deprecated: include "idem/kafka/consumer.h".
#include "idem/kafka/consumer.h"
