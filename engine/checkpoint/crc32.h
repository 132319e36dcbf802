// crc32.h: CRC-32 (IEEE 802.3, polynomial 0xEDB88320, as zlib and PNG use), over one
// buffer or incrementally: crc = crc32_update(crc, data, n) starting from 0.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ember::checkpoint {

uint32_t crc32_update(uint32_t crc, const void* data, std::size_t bytes);
inline uint32_t crc32(const void* data, std::size_t bytes) {
    return crc32_update(0, data, bytes);
}

}  // namespace ember::checkpoint
