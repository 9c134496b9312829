#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace servecast {

// Snappy raw block format (no framing): a varint of the uncompressed length, then
// literal and copy elements. Our own implementation, used by the Parquet reader and
// writer.

// Compresses with a simple greedy matcher (4-byte hash, offsets below 64 KiB).
std::string SnappyCompress(std::string_view input);

// Decompresses a raw Snappy block. Throws DataError when the stream is corrupt
// (bad varint, literal or copy past the end, offset 0 or before the start, output
// length not the one the preamble announced, or longer than max_output_bytes).
std::string SnappyUncompress(std::string_view input, std::size_t max_output_bytes = std::size_t{1} << 31);

}  // namespace servecast
