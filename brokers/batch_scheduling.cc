#include "brokers/batch_scheduling.h"

#include <pthread.h>
#include <sched.h>

namespace idem::brokers {

bool ScheduleAsBatchThread() {
#ifdef SCHED_BATCH
  int policy = 0;
  sched_param param{};
  if (pthread_getschedparam(pthread_self(), &policy, &param) != 0) {
    return false;
  }
  if (policy == SCHED_BATCH) return true;
  if (policy != SCHED_OTHER) return false;
  param.sched_priority = 0;  // the only one SCHED_BATCH takes
  return pthread_setschedparam(pthread_self(), SCHED_BATCH, &param) == 0;
#else
  return false;
#endif
}

}  // namespace idem::brokers
