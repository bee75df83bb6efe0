// Scheduling a thread that runs ahead (an adapter fetching its next batch
// while the loop processes one) as a batch thread, so that waking it does
// not switch the core to it at once. Functions only; thread-safe.
//
// Why: the NATS client wakes the thread that fetches at every message that
// arrives while it waits, under the lock it then needs. A normally
// scheduled thread that slept is run at once, finds the lock held and
// sleeps again: on a busy core, two or more context switches per message.
// A batch thread (Linux's SCHED_BATCH) waits for the running thread's turn
// to end instead, and takes the messages that came meanwhile in one go
// (docs/performance.md, "NATS: the prefetch thread scheduled as a batch
// thread").

#ifndef IDEM_BROKERS_BATCH_SCHEDULING_H_
#define IDEM_BROKERS_BATCH_SCHEDULING_H_

namespace idem::brokers {

// If the calling thread is scheduled normally (SCHED_OTHER), makes it a
// batch thread (SCHED_BATCH; its nice value and share of the CPU are kept,
// only its wakeups no longer preempt the running thread). A thread under
// another policy (real-time, idle, batch already) is left as it is, as is
// every thread where the policy does not exist (not Linux) or the kernel
// refuses it. Returns whether the calling thread is now a batch thread.
bool ScheduleAsBatchThread();

}  // namespace idem::brokers

#endif  // IDEM_BROKERS_BATCH_SCHEDULING_H_
