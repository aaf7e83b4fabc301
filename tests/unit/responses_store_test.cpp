// The bounded in-memory store of responses: oldest evicted first, by count and by bytes.
#include <gtest/gtest.h>

#include "server/responses_store.h"

namespace pith::server {
namespace {

ResponsesStore::Stored stored(int n) {
  return {{{"n", n}}, nlohmann::ordered_json::array()};
}

TEST(ResponsesStore, KeepsTheLastCapacityResponses) {
  ResponsesStore s(2, 1 << 20);
  s.put("a", stored(1));
  s.put("b", stored(2));
  s.put("c", stored(3));
  EXPECT_EQ(s.size(), 2u);
  EXPECT_FALSE(s.get("a"));
  EXPECT_EQ(s.get("b")->response["n"], 2);
  EXPECT_EQ(s.get("c")->response["n"], 3);
}

TEST(ResponsesStore, EraseRemovesAndReportsMissing) {
  ResponsesStore s(2, 1 << 20);
  s.put("a", stored(1));
  EXPECT_TRUE(s.erase("a"));
  EXPECT_FALSE(s.erase("a"));
  EXPECT_FALSE(s.get("a"));
  s.put("b", stored(2));
  s.put("c", stored(3));
  s.put("d", stored(4));  // evicts b, not a slot freed by the erase
  EXPECT_FALSE(s.get("b"));
  EXPECT_TRUE(s.get("c") && s.get("d"));
}

TEST(ResponsesStore, KeepsWithinTheByteBudget) {
  // stored(n) is {"n":n} (7 bytes) and [] (2 bytes): 9 bytes each.
  ResponsesStore s(100, 20);
  s.put("a", stored(1));
  s.put("b", stored(2));
  EXPECT_EQ(s.bytes(), 18u);
  s.put("c", stored(3));  // 27 > 20: a goes
  EXPECT_FALSE(s.get("a"));
  EXPECT_EQ(s.size(), 2u);
  EXPECT_EQ(s.bytes(), 18u);
  ResponsesStore::Stored big{{{"text", std::string(100, 'x')}}, nlohmann::ordered_json::array()};
  s.put("big", big);  // larger than the whole budget: not kept, nothing evicted for it
  EXPECT_FALSE(s.get("big"));
  EXPECT_EQ(s.size(), 2u);
  EXPECT_TRUE(s.erase("b"));
  EXPECT_EQ(s.bytes(), 9u);
}

}  // namespace
}  // namespace pith::server
