// checkpoint.cpp: writing, verifying and restoring checkpoints (checkpoint.h).
#include "engine/checkpoint/checkpoint.h"

#include "engine/checkpoint/crc32.h"
#include "engine/core/cuda_check.h"
#include "engine/core/nvtx.h"

#include <cuda_runtime_api.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

namespace ember::checkpoint {

namespace {

constexpr char kMagic[8] = {'E', 'M', 'B', 'E', 'R', 'C', 'K', 'P'};

class Writer {
  public:
    void append(const void* data, std::size_t size) {
        const std::size_t at = bytes.size();
        bytes.resize(at + size);
        if (size) std::memcpy(bytes.data() + at, data, size);
    }
    template <class T>
    void put(const T& value) {
        append(&value, sizeof(T));
    }
    void put_string(const std::string& s) {
        put(static_cast<uint32_t>(s.size()));
        append(s.data(), s.size());
    }
    std::vector<uint8_t> bytes;
};

class Reader {
  public:
    Reader(const uint8_t* data, std::size_t size, std::string path)
        : data_(data), size_(size), path_(std::move(path)) {}
    template <class T>
    T get(const char* field) {
        need(sizeof(T), field);
        T value;
        std::memcpy(&value, data_ + offset_, sizeof(T));
        offset_ += sizeof(T);
        return value;
    }
    std::string get_string(const char* field) {
        uint32_t length = get<uint32_t>(field);
        if (length > 4096)
            throw CheckpointError(path_ + ": field " + field + " is corrupt (length " + std::to_string(length) + ")");
        need(length, field);
        std::string s(reinterpret_cast<const char*>(data_ + offset_), length);
        offset_ += length;
        return s;
    }
    std::size_t offset() const { return offset_; }

  private:
    void need(std::size_t n, const char* field) {
        if (offset_ + n > size_)
            throw CheckpointError(path_ + ": file truncated in the header (field " + std::string(field) + ")");
    }
    const uint8_t* data_;
    std::size_t size_;
    std::size_t offset_ = 0;
    std::string path_;
};

std::string with_separators(uint64_t n) {
    std::string digits = std::to_string(n), out;
    for (std::size_t i = 0; i < digits.size(); ++i) {
        if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
        out += digits[i];
    }
    return out;
}

Writer encode_header(const CheckpointHeader& h) {
    Writer w;
    w.append(kMagic, sizeof kMagic);
    w.put(h.format_version);
    w.put_string(h.model_name);
    w.put(h.parameter_count);
    w.put(h.flat_length);
    w.put(h.state_length);
    w.put(h.layout_hash);
    w.put_string(h.optimizer_name);
    w.put(h.optimizer_steps);
    w.put(h.optimizer_nadam_mu_product);
    w.put(h.optimizer_state_buffers);
    w.put(h.optimizer_state_length);
    w.put(h.optimizer_segment_norms);
    w.put(h.trainer_steps);
    w.put(h.model_seed);
    w.put(h.loss_scaler.scale);
    w.put(h.loss_scaler.growth_tracker);
    w.put(h.loss_scaler.skipped_steps);
    w.put(h.loss_scaler.growth_count);
    w.put(h.position.epoch);
    w.put(h.position.rng_state);
    w.put(h.position.sampler_epoch);
    w.put(h.position.sampler_index);
    w.put(h.payload_bytes);
    w.put(h.payload_crc);
    return w;
}

std::vector<uint8_t> read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw CheckpointError("cannot open checkpoint " + path + ": " + std::strerror(errno));
    std::vector<uint8_t> data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (in.bad()) throw CheckpointError("cannot read checkpoint " + path);
    return data;
}

// Header fields and where the payload starts.
CheckpointHeader decode_header(const std::vector<uint8_t>& file, const std::string& path, std::size_t& payload_offset) {
    if (file.size() < 8 || std::memcmp(file.data(), kMagic, 8) != 0)
        throw CheckpointError(path + " is not an ember checkpoint (bad magic)");
    Reader r(file.data() + 8, file.size() - 8, path);
    CheckpointHeader h;
    h.format_version = r.get<uint32_t>("format version");
    if (h.format_version != kFormatVersion)
        throw CheckpointError(path + ": checkpoint format version " + std::to_string(h.format_version) +
                              " is not supported (this build reads version " + std::to_string(kFormatVersion) + ")");
    h.model_name = r.get_string("model name");
    h.parameter_count = r.get<uint64_t>("parameter count");
    h.flat_length = r.get<uint64_t>("flat length");
    h.state_length = r.get<uint64_t>("state length");
    h.layout_hash = r.get<uint64_t>("layout hash");
    h.optimizer_name = r.get_string("optimizer name");
    h.optimizer_steps = r.get<int64_t>("optimizer steps");
    h.optimizer_nadam_mu_product = r.get<double>("optimizer nadam mu product");
    h.optimizer_state_buffers = r.get<uint32_t>("optimizer state buffers");
    h.optimizer_state_length = r.get<uint64_t>("optimizer state length");
    h.optimizer_segment_norms = r.get<uint64_t>("optimizer segment norms");
    h.trainer_steps = r.get<int64_t>("trainer steps");
    h.model_seed = r.get<uint64_t>("model seed");
    h.loss_scaler.scale = r.get<double>("loss scale");
    h.loss_scaler.growth_tracker = r.get<int64_t>("loss scaler growth tracker");
    h.loss_scaler.skipped_steps = r.get<int64_t>("loss scaler skipped steps");
    h.loss_scaler.growth_count = r.get<int64_t>("loss scaler growth count");
    h.position.epoch = r.get<int64_t>("epoch");
    h.position.rng_state = r.get<uint64_t>("rng state");
    h.position.sampler_epoch = r.get<int64_t>("sampler epoch");
    h.position.sampler_index = r.get<int64_t>("sampler index");
    h.payload_bytes = r.get<uint64_t>("payload size");
    h.payload_crc = r.get<uint32_t>("payload crc");
    const std::size_t header_end = 8 + r.offset();
    uint32_t stored_header_crc = r.get<uint32_t>("header crc");
    if (crc32(file.data(), header_end) != stored_header_crc)
        throw CheckpointError(path + ": header CRC mismatch: file truncated or corrupt");
    payload_offset = header_end + 4;
    return h;
}

// Host <-> model-device copies of a flat buffer region.
void copy_out(const void* source, bool device, std::size_t bytes, std::vector<uint8_t>& out) {
    std::size_t at = out.size();
    out.resize(at + bytes);
    if (bytes == 0) return;
    if (device)
        EMBER_CUDA_CHECK(cudaMemcpy(out.data() + at, source, bytes, cudaMemcpyDeviceToHost));
    else
        std::memcpy(out.data() + at, source, bytes);
}

void copy_in(void* target, bool device, const uint8_t* source, std::size_t bytes) {
    if (bytes == 0) return;
    if (device)
        EMBER_CUDA_CHECK(cudaMemcpy(target, source, bytes, cudaMemcpyHostToDevice));
    else
        std::memcpy(target, source, bytes);
}

void fsync_directory(const std::filesystem::path& directory) {
    int fd = ::open(directory.empty() ? "." : directory.c_str(), O_RDONLY | O_DIRECTORY);
    if (fd < 0)
        throw CheckpointError("cannot open directory " + directory.string() + " to fsync: " + std::strerror(errno));
    int status = ::fsync(fd);
    ::close(fd);
    if (status != 0)
        throw CheckpointError("fsync of directory " + directory.string() + " failed: " + std::strerror(errno));
}

void write_atomically(const std::string& path, const std::vector<uint8_t>& header,
                      const std::vector<uint8_t>& payload) {
    const std::filesystem::path target(path);
    const std::string temporary = path + ".tmp." + std::to_string(::getpid());
    int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) throw CheckpointError("cannot create " + temporary + ": " + std::strerror(errno));
    auto write_all = [&](const std::vector<uint8_t>& bytes) {
        std::size_t done = 0;
        while (done < bytes.size()) {
            ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
            if (n < 0) {
                if (errno == EINTR) continue;
                std::string why = std::strerror(errno);
                ::close(fd);
                ::unlink(temporary.c_str());
                throw CheckpointError("write to " + temporary + " failed: " + why);
            }
            done += static_cast<std::size_t>(n);
        }
    };
    write_all(header);
    write_all(payload);
    if (::fsync(fd) != 0) {
        std::string why = std::strerror(errno);
        ::close(fd);
        ::unlink(temporary.c_str());
        throw CheckpointError("fsync of " + temporary + " failed: " + why);
    }
    if (::close(fd) != 0) throw CheckpointError("close of " + temporary + " failed: " + std::strerror(errno));
    if (std::rename(temporary.c_str(), path.c_str()) != 0) {
        std::string why = std::strerror(errno);
        ::unlink(temporary.c_str());
        throw CheckpointError("rename " + temporary + " -> " + path + " failed: " + why);
    }
    fsync_directory(target.parent_path());
}

}  // namespace

void save_checkpoint(const std::string& path, nn::Model& model, const optim::Optimizer& optimizer, nn::Trainer& trainer,
                     const TrainingPosition& position) {
    nvtx::ScopedRange range("checkpoint/save", nvtx::Category::checkpoint);
    nn::ParameterStore& store = model.parameters();
    const bool device = model.backend() == Device::cuda;
    if (store.master_dtype() != DType::f32) throw CheckpointError("checkpoints hold f32 parameters only");
    if (device) EMBER_CUDA_CHECK(cudaDeviceSynchronize());

    optim::OptimizerState state;
    try {
        state = optimizer.export_state();
    } catch (const std::logic_error& e) {
        throw CheckpointError("cannot checkpoint optimizer '" + optimizer.name() + "': " + e.what());
    }
    for (const std::vector<float>& buffer : state.buffers)
        if (buffer.size() != optimizer.parameter_count())
            throw CheckpointError("optimizer '" + optimizer.name() + "' exported a state buffer of " +
                                  std::to_string(buffer.size()) + " values for " +
                                  std::to_string(optimizer.parameter_count()) + " parameters");

    CheckpointHeader h;
    h.format_version = kFormatVersion;
    h.model_name = model.name();
    h.parameter_count = store.parameter_count();
    h.flat_length = store.flat_length();
    h.state_length = store.state_length();
    h.layout_hash = store.layout_hash();
    h.optimizer_name = optimizer.name();
    h.optimizer_steps = state.step_count;
    h.optimizer_nadam_mu_product = state.nadam_mu_product;
    h.optimizer_state_buffers = static_cast<uint32_t>(state.buffers.size());
    h.optimizer_state_length = optimizer.parameter_count();
    h.optimizer_segment_norms = state.segment_norms.size();
    h.trainer_steps = trainer.steps();
    h.model_seed = model.build_options().seed;
    h.loss_scaler = trainer.loss_scaler().state();
    h.position = position;

    std::vector<uint8_t> payload;
    copy_out(store.master().data(), device, store.flat_length() * sizeof(float), payload);
    copy_out(store.state_buffer().data(), device, store.state_length() * sizeof(float), payload);
    for (const std::vector<float>& buffer : state.buffers)
        copy_out(buffer.data(), false, buffer.size() * sizeof(float), payload);
    copy_out(state.segment_norms.data(), false, state.segment_norms.size() * sizeof(float), payload);
    h.payload_bytes = payload.size();
    h.payload_crc = crc32(payload.data(), payload.size());

    std::vector<uint8_t> header = encode_header(h).bytes;
    uint32_t header_crc = crc32(header.data(), header.size());
    const auto* p = reinterpret_cast<const uint8_t*>(&header_crc);
    header.insert(header.end(), p, p + sizeof header_crc);
    write_atomically(path, header, payload);
}

CheckpointHeader read_checkpoint_header(const std::string& path) {
    std::vector<uint8_t> file = read_file(path);
    std::size_t payload_offset = 0;
    return decode_header(file, path, payload_offset);
}

TrainingPosition load_checkpoint(const std::string& path, nn::Model& model, optim::Optimizer& optimizer,
                                 nn::Trainer& trainer) {
    nvtx::ScopedRange range("checkpoint/load", nvtx::Category::checkpoint);
    std::vector<uint8_t> file = read_file(path);
    std::size_t payload_offset = 0;
    CheckpointHeader h = decode_header(file, path, payload_offset);
    nn::ParameterStore& store = model.parameters();

    // Everything is checked before anything is restored.
    if (h.model_name != model.name() || h.parameter_count != store.parameter_count())
        throw CheckpointError(path + ": checkpoint model '" + h.model_name + "' (" +
                              with_separators(h.parameter_count) + " parameters) does not match '" + model.name() +
                              "' (" + with_separators(store.parameter_count()) + ")");
    if (h.layout_hash != store.layout_hash() || h.flat_length != store.flat_length() ||
        h.state_length != store.state_length())
        throw CheckpointError(path + ": parameter layout of model '" + model.name() +
                              "' differs from the checkpoint's (same count, different tensors or options)");
    if (h.optimizer_name != optimizer.name())
        throw CheckpointError(path + ": checkpoint optimizer '" + h.optimizer_name + "' does not match '" +
                              optimizer.name() + "'");
    if (h.optimizer_state_buffers != static_cast<uint32_t>(optimizer.state_buffer_count()) ||
        h.optimizer_state_length != optimizer.parameter_count())
        throw CheckpointError(path + ": optimizer '" + optimizer.name() + "' state sizes differ: checkpoint " +
                              std::to_string(h.optimizer_state_buffers) + " buffers of " +
                              std::to_string(h.optimizer_state_length) + ", this one " +
                              std::to_string(optimizer.state_buffer_count()) + " of " +
                              std::to_string(optimizer.parameter_count()) + " (different hyper-parameters?)");
    const uint64_t expected_payload =
        (h.flat_length + h.state_length + uint64_t(h.optimizer_state_buffers) * h.optimizer_state_length +
         h.optimizer_segment_norms) *
        sizeof(float);
    if (h.payload_bytes != expected_payload)
        throw CheckpointError(path + ": payload size " + std::to_string(h.payload_bytes) +
                              " does not match the header (" + std::to_string(expected_payload) + " bytes expected)");
    if (file.size() - payload_offset != h.payload_bytes)
        throw CheckpointError(path + ": CRC mismatch: file truncated or corrupt (payload is " +
                              std::to_string(file.size() - payload_offset) + " bytes, header says " +
                              std::to_string(h.payload_bytes) + ")");
    const uint8_t* payload = file.data() + payload_offset;
    if (crc32(payload, h.payload_bytes) != h.payload_crc)
        throw CheckpointError(path + ": CRC mismatch: file truncated or corrupt");

    // The optimizer checks its state's sizes on import: restore it first, so a refusal
    // leaves the model untouched.
    const std::size_t parameters_bytes = h.flat_length * sizeof(float);
    const std::size_t statistics_bytes = h.state_length * sizeof(float);
    std::size_t at = parameters_bytes + statistics_bytes;
    optim::OptimizerState state;
    state.step_count = h.optimizer_steps;
    state.nadam_mu_product = h.optimizer_nadam_mu_product;
    state.buffers.resize(h.optimizer_state_buffers);
    for (std::vector<float>& buffer : state.buffers) {
        buffer.resize(h.optimizer_state_length);
        std::memcpy(buffer.data(), payload + at, h.optimizer_state_length * sizeof(float));
        at += h.optimizer_state_length * sizeof(float);
    }
    state.segment_norms.resize(h.optimizer_segment_norms);
    std::memcpy(state.segment_norms.data(), payload + at, h.optimizer_segment_norms * sizeof(float));
    try {
        optimizer.import_state(state);
    } catch (const std::exception& e) {
        throw CheckpointError(path + ": optimizer '" + optimizer.name() + "' refused the saved state: " + e.what());
    }
    const bool device = model.backend() == Device::cuda;
    copy_in(store.master().data(), device, payload, parameters_bytes);
    copy_in(store.state_buffer().data(), device, payload + parameters_bytes, statistics_bytes);
    if (device) EMBER_CUDA_CHECK(cudaDeviceSynchronize());  // before any stream uses them
    store.refresh_low_precision();
    model.set_seed(h.model_seed);
    trainer.set_steps(h.trainer_steps);
    trainer.loss_scaler().set_state(h.loss_scaler);
    return h.position;
}

}  // namespace ember::checkpoint
