// Instance ids as clients see them (InstanceRegistry::external_id / parse_id): plain numbers on a
// lone server; REPLICA-RUN-N behind a proxy that routes by the replica (docs/scale-out.md).
#include "server/instance_registry.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

namespace pith::server {
namespace {

TEST(InstanceIds, WithoutAReplicaIdTheyArePlainNumbers) {
  InstanceRegistry r;
  EXPECT_EQ(r.external_id(42), "42");
  std::string why;
  EXPECT_EQ(r.parse_id("42", &why), 42u);
  EXPECT_EQ(r.parse_id("4x2", &why), std::nullopt);
  EXPECT_EQ(r.parse_id("", &why), std::nullopt);
  EXPECT_EQ(r.parse_id("12345678901234567890", &why), std::nullopt);  // > 19 digits
  EXPECT_TRUE(why.empty());
}

TEST(InstanceIds, NameTheReplicaAndItsRun) {
  InstanceRegistry r;
  r.set_replica("pith-0");  // a StatefulSet pod name: '-' inside the replica name
  const std::string id = r.external_id(7);
  ASSERT_EQ(id.rfind("pith-0-", 0), 0u) << id;
  ASSERT_EQ(id.substr(id.rfind('-')), "-7");
  std::string why;
  EXPECT_EQ(r.parse_id(id, &why), 7u);
  EXPECT_EQ(r.parse_id("7", &why), 7u);  // the bare number still works on the replica itself
  EXPECT_TRUE(why.empty());

  const std::string run = id.substr(7, id.rfind('-') - 7);
  EXPECT_EQ(r.parse_id("pith-1-" + run + "-7", &why), std::nullopt);
  EXPECT_NE(why.find("names replica 'pith-1', this is replica 'pith-0'"), std::string::npos) << why;
  why.clear();
  EXPECT_EQ(r.parse_id("pith-0-zzz-7", &why), std::nullopt);
  EXPECT_NE(why.find("earlier run of replica 'pith-0'"), std::string::npos) << why;
  why.clear();
  EXPECT_EQ(r.parse_id("pith-0-" + run + "-x", &why), std::nullopt);
  EXPECT_EQ(r.parse_id("nodash-7", &why), std::nullopt);
}

TEST(InstanceIds, ARestartedReplicaHasANewRun) {
  InstanceRegistry before, after;
  before.set_replica("r1");
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  after.set_replica("r1");
  const std::string old_id = before.external_id(1);
  ASSERT_NE(old_id, after.external_id(1));
  std::string why;
  EXPECT_EQ(after.parse_id(old_id, &why), std::nullopt);
  EXPECT_NE(why.find("restarted since"), std::string::npos) << why;
}

}  // namespace
}  // namespace pith::server
