// A dictzip file (dataset/src/dictzip.cpp, FreeDict's .dict.dz): the header and chunk table
// checked, the text read front to back in pieces and verified, then read again by a second
// reader chunk by chunk from the end. Both must give the same text, and a file that verified
// once must verify again. Input: the file.
#include <algorithm>

#include "fuzz_support.h"
#include "tnt/dataset/dictzip.h"
#include "tnt/dataset/error.h"

using tnt::data::DictzipReader;

namespace {

// Pieces that do not line up with chunks, so that reads span chunk boundaries.
constexpr std::size_t kPiece = 777;

std::string read_forward(DictzipReader& reader) {
  std::string text;
  for (std::uint64_t at = 0; at < reader.size(); at += kPiece) {
    const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(kPiece, reader.size() - at));
    const std::string piece = reader.read(at, n);
    if (piece.size() != n) tnt::fuzz::violated("read returned the wrong number of bytes");
    text += piece;
  }
  reader.verify();
  return text;
}

void read_backward(DictzipReader& reader, const std::string& text) {
  const std::size_t length = reader.chunk_length();
  for (std::size_t k = reader.chunk_count(); k-- > 0;) {
    const std::uint64_t begin = std::uint64_t{k} * length;
    const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(length, reader.size() - begin));
    if (reader.read(begin, n) != text.substr(begin, n)) tnt::fuzz::violated("a chunk read alone differs");
  }
  reader.verify();
  if (reader.read(reader.size(), 0) != "") tnt::fuzz::violated("an empty read at the end is not empty");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string bytes(tnt::fuzz::as_text(data, size));
  std::string text;
  try {
    auto reader = DictzipReader::from_bytes(bytes, "fuzz.dict.dz");
    if (reader.chunk_count() == 0 || reader.chunk_length() == 0) tnt::fuzz::violated("empty chunk table accepted");
    if (reader.size() > std::uint64_t{reader.chunk_length()} * reader.chunk_count())
      tnt::fuzz::violated("text longer than its chunks");
    text = read_forward(reader);
    try {
      reader.read(reader.size(), 1);
      tnt::fuzz::violated("a read past the end succeeded");
    } catch (const tnt::data::DataError&) {
    }
  } catch (const tnt::data::DataError&) {
    return 0;
  }
  // The file verified: a second reader must accept it in any order of reads.
  try {
    auto again = DictzipReader::from_bytes(bytes, "fuzz.dict.dz");
    read_backward(again, text);
  } catch (const tnt::data::DataError& e) {
    tnt::fuzz::violated(std::string("a file that verified failed when read backwards: ") + e.what());
  }
  return 0;
}
