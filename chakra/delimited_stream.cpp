// paralab — varint length-prefixed protobuf messages (delimited_stream.hpp).
#include "chakra/delimited_stream.hpp"

#include "sim/replay/trace.hpp"

namespace paralab::chakra {

using sim::replay::TraceError;

void append_delimited(const google::protobuf::MessageLite& m, std::string& out) {
  uint64_t n = m.ByteSizeLong();
  do {
    auto byte = static_cast<unsigned char>(n & 0x7f);
    n >>= 7;
    if (n) byte |= 0x80;
    out.push_back(static_cast<char>(byte));
  } while (n);
  m.AppendToString(&out);
}

DelimitedReader::DelimitedReader(std::string file, std::string bytes) : file_(std::move(file)), bytes_(std::move(bytes)) {
  if (bytes_.size() >= 2 && static_cast<unsigned char>(bytes_[0]) == 0x1f && static_cast<unsigned char>(bytes_[1]) == 0x8b)
    throw TraceError(file_, std::nullopt, "the file is gzip-compressed; decompress it first (gunzip)");
}

bool DelimitedReader::next(google::protobuf::MessageLite& m, const char* what) {
  if (pos_ == bytes_.size()) return false;
  const size_t at = pos_;
  const std::string where = "message " + std::to_string(count_ + 1) + " (" + what + ") at byte " + std::to_string(at);
  uint64_t len = 0;
  for (int shift = 0;; shift += 7) {
    if (pos_ == bytes_.size())
      throw TraceError(file_, std::nullopt, "truncated: the length prefix of " + where + " runs past the end of the file");
    if (shift > 28) throw TraceError(file_, std::nullopt, "malformed: the length prefix of " + where + " is too long");
    const auto byte = static_cast<unsigned char>(bytes_[pos_++]);
    len |= static_cast<uint64_t>(byte & 0x7f) << shift;
    if (!(byte & 0x80)) break;
  }
  const size_t left = bytes_.size() - pos_;
  if (len > left)
    throw TraceError(file_, std::nullopt, "truncated: " + where + " is " + std::to_string(len) +
                                              " bytes long (its length prefix) but the file has only " +
                                              std::to_string(left) + " bytes left");
  if (!m.ParseFromArray(bytes_.data() + pos_, static_cast<int>(len)))
    throw TraceError(file_, std::nullopt, "malformed: " + where + " is not a valid protobuf " + what);
  pos_ += len;
  ++count_;
  return true;
}

}  // namespace paralab::chakra
