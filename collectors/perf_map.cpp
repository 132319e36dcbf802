// perf_map.cpp: reads /tmp/perf-PID.map (see perf_map.h).
#include "collectors/perf_map.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>

namespace ember::collector {

PerfMap::PerfMap(std::string path) : path_(std::move(path)) {}

std::string PerfMap::path_for_this_process() {
    return "/tmp/perf-" + std::to_string(getpid()) + ".map";
}

namespace {

// "START SIZE NAME": hex numbers with or without 0x; the name is the rest of the line
// (it may hold spaces).
bool parse_line(const std::string& line, std::uintptr_t* start, std::uintptr_t* size, std::string* name) {
    const char* text = line.c_str();
    char* end = nullptr;
    *start = std::strtoull(text, &end, 16);
    if (end == text || *end != ' ') return false;
    const char* size_text = end + 1;
    *size = std::strtoull(size_text, &end, 16);
    if (end == size_text || *end != ' ' || *size == 0) return false;
    name->assign(end + 1);
    while (!name->empty() && (name->back() == '\r' || name->back() == ' ')) name->pop_back();
    return !name->empty();
}

}  // namespace

void PerfMap::read_new_lines() {
    std::ifstream in(path_, std::ios::binary);
    if (!in) return;
    in.seekg(0, std::ios::end);
    const auto size = static_cast<std::uint64_t>(in.tellg());
    if (size < read_bytes_) {  // rewritten (a new process with this pid): start over
        entries_.clear();
        read_bytes_ = 0;
        lines_ = 0;
    }
    if (size == read_bytes_) return;
    in.seekg(static_cast<std::streamoff>(read_bytes_));
    std::string line;
    bool added = false;
    while (std::getline(in, line)) {
        if (in.eof()) break;  // a line still being written: read it next time
        read_bytes_ += line.size() + 1;
        std::uintptr_t start = 0, length = 0;
        std::string name;
        if (!parse_line(line, &start, &length, &name)) continue;
        entries_.push_back({start, start + length, lines_++, std::move(name)});
        added = true;
    }
    if (added)
        std::sort(entries_.begin(), entries_.end(),
                  [](const Entry& left, const Entry& right) { return left.start < right.start; });
}

const PerfMap::Entry* PerfMap::lookup(std::uintptr_t address) const {
    // Functions do not nest, but a later one may cover reused memory: of the entries
    // that start at or below the address, the covering one written last wins. A map
    // holds hundreds to thousands of lines and each new address is looked up once.
    auto after = std::upper_bound(entries_.begin(), entries_.end(), address,
                                  [](std::uintptr_t value, const Entry& entry) { return value < entry.start; });
    const Entry* best = nullptr;
    for (auto it = entries_.begin(); it != after; ++it)
        if (address < it->end && (best == nullptr || it->order > best->order)) best = &*it;
    return best;
}

std::string PerfMap::find(std::uintptr_t address) {
    read_new_lines();
    const Entry* entry = lookup(address);
    return entry ? entry->name : std::string();
}

}  // namespace ember::collector
