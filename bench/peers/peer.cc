// The balance encoding shared by the embedded peers (bench/peers/peer.h).

#include "bench/peers/peer.h"

#include <cstring>

namespace idem::peers {

std::string EncodeBalance(int64_t balance) {
  std::string out(sizeof(balance), '\0');
  std::memcpy(out.data(), &balance, sizeof(balance));
  return out;
}

int64_t DecodeBalance(std::string_view bytes) {
  int64_t balance = 0;
  if (bytes.size() == sizeof(balance)) {
    std::memcpy(&balance, bytes.data(), sizeof(balance));
  }
  return balance;
}

}  // namespace idem::peers
