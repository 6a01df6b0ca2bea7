// paralab — Chakra's on-disk framing: a file is a sequence of protobuf messages, each preceded
// by its byte length as a base-128 varint (what protobuf's CodedOutputStream::WriteVarint32
// writes; Chakra's feeder reads it back with ReadVarint32 and a PushLimit, their
// src/third_party/utils/protoio.cc). The first message is a GlobalMetadata, the rest Nodes.
#pragma once

#include <cstdint>
#include <string>

#include <google/protobuf/message_lite.h>

namespace paralab::chakra {

// Appends `m`, length-prefixed, to `out`.
void append_delimited(const google::protobuf::MessageLite& m, std::string& out);

// Reads messages one by one out of a file's bytes; every failure is a sim::replay::TraceError
// naming `file`, the message's position and byte offset.
class DelimitedReader {
 public:
  DelimitedReader(std::string file, std::string bytes);
  // Parses the next message into `m`; false at the end of the file (between messages).
  bool next(google::protobuf::MessageLite& m, const char* what);
  [[nodiscard]] size_t messages() const { return count_; }
  [[nodiscard]] const std::string& file() const { return file_; }

 private:
  std::string file_, bytes_;
  size_t pos_ = 0, count_ = 0;
};

}  // namespace paralab::chakra
