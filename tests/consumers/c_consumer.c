/* A C program that uses idem's C API (idem/c.h) the way a project that
 * depends on it does: built by tests/consumers/find_package/ (linking
 * idem::c) and by .ci/run with pkg-config's flags for idem. Opens an engine
 * in a new temporary directory, processes one message twice (the second is
 * a duplicate) and prints the API's version. Exits 0 on success. */

#define _XOPEN_SOURCE 700 /* mkdtemp */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "idem/c.h"

static int put(void* user, const idem_message* message, idem_txn* txn) {
  (void)user;
  (void)message;
  return idem_txn_put(txn, "k", 1, "v", 1) == IDEM_OK ? IDEM_HANDLER_COMMIT
                                                     : 1;
}

static int fail(const char* what) {
  fprintf(stderr, "c_consumer: %s: %s\n", what, idem_last_error());
  return 1;
}

int main(void) {
  char dir[] = "/tmp/idem_c_consumer_XXXXXX";
  if (mkdtemp(dir) == NULL) return fail("mkdtemp");
  char path[64];
  snprintf(path, sizeof path, "%s/store", dir);
  idem_engine* engine = NULL;
  if (idem_engine_open(path, NULL, &engine) != IDEM_OK) return fail("open");
  idem_message* m = idem_message_new();
  idem_message_set_id(m, "order-1", 7);
  idem_outcome outcomes[2];
  for (int i = 0; i < 2; ++i) {
    idem_result* r = NULL;
    if (idem_engine_process(engine, m, put, NULL, &r) != IDEM_OK) {
      return fail("process");
    }
    outcomes[i] = idem_result_outcome(r);
    idem_result_free(r);
  }
  idem_message_free(m);
  idem_engine_free(engine);
  char command[96];
  snprintf(command, sizeof command, "rm -rf %s", dir);
  if (system(command) != 0) return fail("rm");
  if (outcomes[0] != IDEM_OUTCOME_PROCESSED ||
      outcomes[1] != IDEM_OUTCOME_DUPLICATE) {
    fprintf(stderr, "c_consumer: unexpected outcomes %d %d\n", outcomes[0],
            outcomes[1]);
    return 1;
  }
  printf("idem C API %d (idem %s): processed, then duplicate\n",
         idem_c_api_version(), idem_version());
  return 0;
}
