// Malformed Chakra traces: each is a TraceError (a ConfigError: `paralab simulate --chakra`
// exits 2) naming the file and, where there is one, the node.
#include <catch2/catch.hpp>

#include "chakra/chakra_import.hpp"
#include "chakra_test_util.hpp"
#include "sim/replay/replay.hpp"

using namespace paralab;
using namespace paralab::chakra::test;
using sim::replay::TraceError;

namespace {

// The error read_chakra(dir) throws; fails the test when there is none.
TraceError error_of(const std::filesystem::path& dir) {
  try {
    (void)chakra::read_chakra(dir);
  } catch (const TraceError& e) {
    return e;
  }
  FAIL("no TraceError");
  throw std::logic_error("unreachable");
}

}  // namespace

TEST_CASE("chakra errors: a length prefix beyond the end of the file", "[chakra]") {
  calib::TempDir d("paralab-chakra-err");
  std::string bytes = trace_bytes({compute(1, 5), compute(2, 5, {1})});
  bytes.resize(bytes.size() - 3);
  write_bytes(d.path() / "t.0.et", bytes);
  const TraceError e = error_of(d.path());
  CHECK_THAT(e.what(), Catch::Contains("t.0.et") && Catch::Contains("truncated") && Catch::Contains("message 3 (Node)"));
  // A length prefix cut in the middle of its varint.
  std::string cut = trace_bytes({compute(1, 5)});
  cut.push_back(static_cast<char>(0x80));
  write_bytes(d.path() / "t.0.et", cut);
  CHECK_THAT(error_of(d.path()).what(), Catch::Contains("length prefix of message 3") && Catch::Contains("runs past"));
}

TEST_CASE("chakra errors: a message that is not protobuf", "[chakra]") {
  calib::TempDir d("paralab-chakra-err");
  std::string bytes = trace_bytes({compute(1, 5)});
  bytes += std::string("\x04\xff\xff\xff\xff", 5);  // 4 bytes of an invalid tag
  write_bytes(d.path() / "t.0.et", bytes);
  CHECK_THAT(error_of(d.path()).what(), Catch::Contains("t.0.et") && Catch::Contains("malformed") &&
                                            Catch::Contains("not a valid protobuf Node"));
}

TEST_CASE("chakra errors: a dependency on a node not in the file", "[chakra]") {
  calib::TempDir d("paralab-chakra-err");
  write_trace(d.path(), 0, {compute(1, 5), compute(2, 5, {99})});
  const TraceError e = error_of(d.path());
  CHECK(e.node() == 2u);
  CHECK_THAT(e.what(), Catch::Contains("t.0.et: node 2") && Catch::Contains("depends on node 99"));
}

TEST_CASE("chakra errors: a dependency cycle", "[chakra]") {
  calib::TempDir d("paralab-chakra-err");
  write_trace(d.path(), 0, {compute(1, 5), compute(2, 5, {1, 4}), compute(3, 5, {2}), compute(4, 5, {3})});
  const TraceError e = error_of(d.path());
  REQUIRE(e.node());
  CHECK((*e.node() == 2 || *e.node() == 3 || *e.node() == 4));
  CHECK_THAT(e.what(), Catch::Contains("t.0.et") && Catch::Contains("cycle") && Catch::Contains("3 nodes"));
}

TEST_CASE("chakra errors: node types, collectives, groups, peers and ranks", "[chakra]") {
  calib::TempDir d("paralab-chakra-err");
  const auto only = [&](const std::vector<et::Node>& r0, const std::vector<et::Node>& r1) {
    std::filesystem::remove_all(d.path());
    std::filesystem::create_directories(d.path());
    write_trace(d.path(), 0, r0);
    write_trace(d.path(), 1, r1);
    return error_of(d.path());
  };
  CHECK_THAT(only({node(7, et::INVALID_NODE)}, {}).what(), Catch::Contains("node 7") && Catch::Contains("node type 0"));
  CHECK_THAT(only({collective(3, 1, 100, "")}, {collective(3, 1, 100, "")}).what(),
             Catch::Contains("node 3") && Catch::Contains("REDUCE") && Catch::Contains("no model"));
  CHECK_THAT(only({collective(3, 0, 100, "5")}, {collective(3, 0, 100, "5")}).what(),
             Catch::Contains("process group '5' is not defined"));
  CHECK_THAT(only({send(4, 7, 100, 1)}, {}).what(), Catch::Contains("node 4") && Catch::Contains("peer rank 7"));
  et::Node no_size = node(5, et::COMM_SEND_NODE);
  chakra::add_int32(*no_size.mutable_attr(), "comm_dst", 1);
  CHECK_THAT(only({no_size}, {}).what(), Catch::Contains("node 5") && Catch::Contains("'comm_size'"));
  // Collectives matched by occurrence whose sizes differ.
  const TraceError e = [&] {
    std::filesystem::remove_all(d.path());
    std::filesystem::create_directories(d.path());
    write_trace(d.path(), 0, {collective(3, 0, 100, "")});
    write_trace(d.path(), 1, {collective(3, 0, 200, "")});
    try {
      (void)sim::replay::replay(chakra::read_chakra(d.path()), shipped("dgx-h100"));
    } catch (const TraceError& x) {
      return x;
    }
    FAIL("no TraceError");
    throw std::logic_error("unreachable");
  }();
  CHECK_THAT(e.what(), Catch::Contains("disagree"));
}

TEST_CASE("chakra errors: the folder", "[chakra]") {
  calib::TempDir d("paralab-chakra-err");
  CHECK_THAT(error_of(d.path()).what(), Catch::Contains("no Chakra traces"));
  write_trace(d.path(), 1, {compute(1, 5)});
  CHECK_THAT(error_of(d.path()).what(), Catch::Contains("no trace of rank 0"));
  write_trace(d.path(), 0, {compute(1, 5)});
  write_bytes(d.path() / "other.0.et", trace_bytes({}));
  CHECK_THAT(error_of(d.path()).what(), Catch::Contains("several prefixes"));
  std::filesystem::remove(d.path() / "other.0.et");
  write_bytes(d.path() / "t.0.et", std::string("\x1f\x8b\x08\x00", 4));
  CHECK_THAT(error_of(d.path()).what(), Catch::Contains("gzip"));
  write_bytes(d.path() / "t.0.et", "");
  CHECK_THAT(error_of(d.path()).what(), Catch::Contains("no GlobalMetadata"));
}
