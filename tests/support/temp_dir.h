// temp_dir.h: a fresh folder under the system temp directory that belongs to one test
// (mkdtemp picks a name no other process holds, so tests running side by side under
// CTest never share one), removed with everything in it when the TempDir goes.
#pragma once

#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

namespace ember::test_support {

class TempDir {
  public:
    // <temp dir>/<stem>-XXXXXX, e.g. TempDir("ember-import-test").
    explicit TempDir(const std::string& stem = "ember-test") : path_(make(stem)) {}
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
    ~TempDir() {
        std::error_code ignored;
        std::filesystem::remove_all(path_, ignored);
    }

    // The folder itself.
    const std::filesystem::path& path() const { return path_; }
    const std::string& folder() const { return folder_; }
    // A file (or folder) named `name` inside it.
    std::string path(const std::string& name) const { return (path_ / name).string(); }
    // The names of what is in the folder, sorted (to check nothing was left behind).
    std::vector<std::string> files() const {
        std::vector<std::string> names;
        for (const auto& entry : std::filesystem::directory_iterator(path_))
            names.push_back(entry.path().filename().string());
        std::sort(names.begin(), names.end());
        return names;
    }

  private:
    static std::filesystem::path make(const std::string& stem) {
        std::string pattern = (std::filesystem::temp_directory_path() / (stem + "-XXXXXX")).string();
        if (mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed for " + pattern);
        return pattern;
    }

    std::filesystem::path path_;
    std::string folder_ = path_.string();
};

}  // namespace ember::test_support
