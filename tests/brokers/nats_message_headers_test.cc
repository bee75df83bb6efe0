// nats/message_headers.h: a NATS header block read in order without nats.c's
// header map, refused (for nats.c to read) where the two would differ; and,
// against a real nats-server, the in-place read of a received message giving
// what nats.c's natsMsgHeader_Keys and _Values give.

#include <nats/nats.h>

#include <algorithm>
#include <cstdlib>
#include <iterator>
#include <memory>
#include <optional>
#include <string>

#include "gtest/gtest.h"
#include "nats/message_headers.h"
#include "servers/nats_server.h"
#include "tests/brokers/nats_suite.h"

namespace idem::nats {
namespace {

TEST(NatsHeaderBlockTest, ReadsHeadersInOrderWithRepeatsAndTrimmedValues) {
  HeaderList headers;
  ASSERT_TRUE(ParseHeaderBlock(
      "NATS/1.0\r\nmessage-id: a1\r\nk:v1\r\nk:  v 2 \t\r\nother: x:y\r\n\r\n",
      &headers));
  EXPECT_EQ(
      headers,
      (HeaderList{
          {"message-id", "a1"}, {"k", "v1"}, {"k", "v 2"}, {"other", "x:y"}}));
}

TEST(NatsHeaderBlockTest, ReadsABlockWithoutHeaders) {
  HeaderList headers;
  ASSERT_TRUE(ParseHeaderBlock("NATS/1.0\r\n\r\n", &headers));
  EXPECT_TRUE(headers.empty());
}

TEST(NatsHeaderBlockTest, AUsedListHoldsOnlyTheNewBlocksHeaders) {
  HeaderList headers = {{"old-1", std::string(40, 'x')}, {"old-2", "y"}};
  ASSERT_TRUE(ParseHeaderBlock("NATS/1.0\r\nnew: 1\r\n\r\n", &headers));
  EXPECT_EQ(headers, (HeaderList{{"new", "1"}}));
  ASSERT_TRUE(
      ParseHeaderBlock("NATS/1.0\r\na: 1\r\nb: 2\r\nc: 3\r\n\r\n", &headers));
  EXPECT_EQ(headers, (HeaderList{{"a", "1"}, {"b", "2"}, {"c", "3"}}));
  ASSERT_TRUE(ParseHeaderBlock("NATS/1.0\r\n\r\n", &headers));
  EXPECT_TRUE(headers.empty());
}

TEST(NatsHeaderBlockTest, RefusesWhatNatsCReadsOtherwise) {
  for (const char* block : {
           "", "NATS/1.1\r\na: 1\r\n\r\n",
           "NATS/1.0 503\r\n\r\n",                  // a status
           "NATS/1.0\r\na: 1\r\n folded\r\n\r\n",   // a continuation line
           "NATS/1.0\r\na: 1\r\nb:\r\n\r\n",        // an empty value
           "NATS/1.0\r\n: 1\r\n\r\n",               // an empty name
           "NATS/1.0\r\na 1\r\n\r\n",               // no colon
           "NATS/1.0\r\na: 1\r\n",                  // no blank line
           "NATS/1.0\r\na: 1\r\n\r\nb: 2\r\n\r\n",  // a line after it
       }) {
    HeaderList headers;
    EXPECT_FALSE(ParseHeaderBlock(block, &headers)) << block;
  }
}

TEST(NatsHeaderBlockTest, AMessageBuiltHereIsReadThroughNatsC) {
  ASSERT_EQ(nats_Open(-1), NATS_OK);  // the library's messages need it
  natsMsg* msg = nullptr;
  ASSERT_EQ(natsMsg_Create(&msg, "s", nullptr, "x", 1), NATS_OK);
  ASSERT_EQ(natsMsgHeader_Set(msg, "message-id", "m1"), NATS_OK);
  // Its headers are in nats.c's map already: no block to read in place.
  EXPECT_FALSE(ReceivedHeaderBlock(msg).has_value());
  HeaderList headers = {{"old", "1"}, {"older", "2"}};
  ReadHeaders(msg, &headers);
  EXPECT_EQ(headers, (HeaderList{{"message-id", "m1"}}));
  natsMsg_Destroy(msg);
}

// A core NATS connection to the suite's server subscribed to subject "h".
class CoreSubscription {
 public:
  explicit CoreSubscription(int port) {
    ok_ = natsConnection_ConnectTo(&connection_,
                                   servers::NatsUrl(port).c_str()) == NATS_OK &&
          natsConnection_SubscribeSync(&subscription_, connection_, "h") ==
              NATS_OK;
  }
  ~CoreSubscription() {
    if (subscription_ != nullptr) natsSubscription_Destroy(subscription_);
    if (connection_ != nullptr) natsConnection_Destroy(connection_);
  }
  bool ok() const { return ok_; }

  // Publishes `sent` (destroying it) to "h" and returns it as received (the
  // caller destroys it), or nullptr.
  natsMsg* RoundTrip(natsMsg* sent) {
    EXPECT_EQ(natsConnection_PublishMsg(connection_, sent), NATS_OK);
    natsMsg_Destroy(sent);
    natsMsg* received = nullptr;
    EXPECT_EQ(natsSubscription_NextMsg(&received, subscription_, 5000),
              NATS_OK);
    return received;
  }

 private:
  natsConnection* connection_ = nullptr;
  natsSubscription* subscription_ = nullptr;
  bool ok_ = false;
};

// The names and values nats.c's own map gives for `msg`, sorted.
HeaderList ThroughNatsC(natsMsg* msg) {
  HeaderList headers;
  const char** keys = nullptr;
  int key_count = 0;
  if (natsMsgHeader_Keys(msg, &keys, &key_count) == NATS_OK) {
    for (int k = 0; k < key_count; ++k) {
      const char** values = nullptr;
      int value_count = 0;
      if (natsMsgHeader_Values(msg, keys[k], &values, &value_count) ==
          NATS_OK) {
        for (int v = 0; v < value_count; ++v) {
          headers.emplace_back(keys[k], values[v]);
        }
        free(static_cast<void*>(values));
      }
    }
    free(static_cast<void*>(keys));
  }
  std::sort(headers.begin(), headers.end());
  return headers;
}

TEST_F(NatsConsumerTest, ReadsAReceivedMessagesHeadersInPlaceAsNatsCDoes) {
  CoreSubscription core(server_->port());
  ASSERT_TRUE(core.ok());
  natsMsg* sent = nullptr;
  ASSERT_EQ(natsMsg_Create(&sent, "h", nullptr, "payload", 7), NATS_OK);
  ASSERT_EQ(natsMsgHeader_Add(sent, "message-id", "m-1"), NATS_OK);
  ASSERT_EQ(natsMsgHeader_Add(sent, "Trace", "a b c"), NATS_OK);
  ASSERT_EQ(natsMsgHeader_Add(sent, "Trace", "second"), NATS_OK);
  ASSERT_EQ(natsMsgHeader_Add(sent, "colon", "x:y"), NATS_OK);
  natsMsg* received = core.RoundTrip(sent);
  ASSERT_NE(received, nullptr);

  // On this nats.c the block is read where the message holds it.
  const std::optional<std::string_view> block = ReceivedHeaderBlock(received);
  ASSERT_TRUE(block.has_value());
  HeaderList in_place;
  ASSERT_TRUE(ParseHeaderBlock(*block, &in_place));
  HeaderList read = {{"old", std::string(40, 'x')}};
  ReadHeaders(received, &read);
  EXPECT_EQ(read, in_place);
  // Same-named headers keep the order they were sent in (nats.c sends the
  // names themselves in its map's order).
  HeaderList traces;
  std::copy_if(in_place.begin(), in_place.end(), std::back_inserter(traces),
               [](const auto& header) { return header.first == "Trace"; });
  EXPECT_EQ(traces, (HeaderList{{"Trace", "a b c"}, {"Trace", "second"}}));
  // nats.c's map (built only now) says the same.
  std::sort(in_place.begin(), in_place.end());
  EXPECT_EQ(in_place, (HeaderList{{"Trace", "a b c"},
                                  {"Trace", "second"},
                                  {"colon", "x:y"},
                                  {"message-id", "m-1"}}));
  EXPECT_EQ(ThroughNatsC(received), in_place);
  EXPECT_EQ(
      std::string(natsMsg_GetData(received), natsMsg_GetDataLength(received)),
      "payload");
  natsMsg_Destroy(received);
}

TEST_F(NatsConsumerTest, AReceivedMessageWithoutHeadersHasAnEmptyBlock) {
  CoreSubscription core(server_->port());
  ASSERT_TRUE(core.ok());
  natsMsg* sent = nullptr;
  ASSERT_EQ(natsMsg_Create(&sent, "h", nullptr, "p", 1), NATS_OK);
  natsMsg* received = core.RoundTrip(sent);
  ASSERT_NE(received, nullptr);
  const std::optional<std::string_view> block = ReceivedHeaderBlock(received);
  ASSERT_TRUE(block.has_value());
  EXPECT_TRUE(block->empty());
  HeaderList headers = {{"old", "1"}};
  ReadHeaders(received, &headers);
  EXPECT_TRUE(headers.empty());
  natsMsg_Destroy(received);
}

}  // namespace
}  // namespace idem::nats
