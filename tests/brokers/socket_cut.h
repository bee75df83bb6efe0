// What the broker suites use to cut a client's connection under it, as a
// proxy reset, an idle timeout or a firewall would: shutdown(2) on every
// socket of this process connected to a port. The client's next write to
// such a socket fails with EPIPE and raises SIGPIPE, whose default action
// ends the process unless the client prevents it. Not thread-safe.

#ifndef IDEM_TESTS_BROKERS_SOCKET_CUT_H_
#define IDEM_TESTS_BROKERS_SOCKET_CUT_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <string>

namespace idem::test {

// Shuts down (both directions) every socket of this process whose peer is
// `port` on an IPv4 address; returns how many.
inline int CutConnectionsTo(int port) {
  int cut = 0;
  std::error_code error;
  for (const auto& entry :
       std::filesystem::directory_iterator("/proc/self/fd", error)) {
    char* end = nullptr;
    const std::string name = entry.path().filename().string();
    const long fd = std::strtol(name.c_str(), &end, 10);
    if (end == name.c_str() || *end != '\0') continue;
    struct stat st;
    if (fstat(static_cast<int>(fd), &st) != 0 || !S_ISSOCK(st.st_mode)) {
      continue;
    }
    sockaddr_in peer{};
    socklen_t length = sizeof(peer);
    if (getpeername(static_cast<int>(fd), reinterpret_cast<sockaddr*>(&peer),
                    &length) != 0 ||
        peer.sin_family != AF_INET || ntohs(peer.sin_port) != port) {
      continue;
    }
    if (shutdown(static_cast<int>(fd), SHUT_RDWR) == 0) ++cut;
  }
  return cut;
}

// What the process does with SIGPIPE now: SIG_DFL (ends it), SIG_IGN or a
// handler.
inline sighandler_t SigpipeDisposition() {
  struct sigaction action {};
  sigaction(SIGPIPE, nullptr, &action);
  return action.sa_handler;
}

}  // namespace idem::test

#endif  // IDEM_TESTS_BROKERS_SOCKET_CUT_H_
