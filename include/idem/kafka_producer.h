// Deprecated: include "idem/kafka/producer.h".
#include "idem/kafka/producer.h"
