// crc32.cpp: table-driven CRC-32 (crc32.h).
#include "engine/checkpoint/crc32.h"

#include <array>

namespace ember::checkpoint {

namespace {
std::array<uint32_t, 256> make_table() {
    std::array<uint32_t, 256> table{};
    for (uint32_t i = 0; i < 256; ++i) {
        uint32_t c = i;
        for (int k = 0; k < 8; ++k) c = (c & 1u) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        table[i] = c;
    }
    return table;
}
}  // namespace

uint32_t crc32_update(uint32_t crc, const void* data, std::size_t bytes) {
    static const std::array<uint32_t, 256> table = make_table();
    const auto* p = static_cast<const unsigned char*>(data);
    crc = ~crc;
    for (std::size_t i = 0; i < bytes; ++i) crc = table[(crc ^ p[i]) & 0xffu] ^ (crc >> 8);
    return ~crc;
}

}  // namespace ember::checkpoint
