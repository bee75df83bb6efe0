// Deprecated: include "idem/kafka/mock_cluster.h".
#include "idem/kafka/mock_cluster.h"
