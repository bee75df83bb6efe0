// Reading a received NATS message's headers without nats.c's header map.
// nats.c (3.4) turns a message's header block into a hash map on first use
// (natsMsgHeader_Keys, _Values, _Get): a map, an entry and a value per
// header and two arrays to hand them out, all allocated and freed for every
// message. The consumer needs each header once, in order, so it reads the
// block as the server sent it. Functions only; thread-compatible.

#ifndef IDEM_NATS_MESSAGE_HEADERS_H_
#define IDEM_NATS_MESSAGE_HEADERS_H_

#include <nats/nats.h>

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace idem::nats {

using HeaderList = std::vector<std::pair<std::string, std::string>>;

// Sets `out` to the headers of `block`, a NATS header block as the server
// sends it ("NATS/1.0[ status]\r\n", then "Name: value\r\n" lines, then
// "\r\n"), in their order, names repeating as they do, each value trimmed of
// the spaces around it: what natsMsgHeader_Keys and _Values give for the
// same block. The strings `out` holds are written over (their memory
// reused), so a list refilled for every message allocates only when a
// header outgrows its string. Returns false for any block it does not read
// the same way as nats.c: a malformed one, an empty name or value, a
// folded (continuation) line, or a status on the first line (which nats.c
// turns into headers of its own); `out` then holds some of its first
// headers, or what it held. The caller then asks nats.c.
bool ParseHeaderBlock(std::string_view block, HeaderList* out);

// The header block of `msg`, a message received from the server, read in
// place (no copy, no map): empty when it has no headers; nullopt when it
// cannot be read that way. That is: a nats.c other than the 3.4 series whose
// message layout this reads (checked at run time against the public
// accessors, field by field), or headers already turned into nats.c's map.
// The view lives as long as `msg`.
std::optional<std::string_view> ReceivedHeaderBlock(natsMsg* msg);

// Sets `out` to `msg`'s headers, reusing its strings: ParseHeaderBlock on
// ReceivedHeaderBlock where it can, else natsMsgHeader_Keys and _Values
// (then grouped by name, in nats.c's map order).
void ReadHeaders(natsMsg* msg, HeaderList* out);

}  // namespace idem::nats

#endif  // IDEM_NATS_MESSAGE_HEADERS_H_
