// context.cpp: creating and destroying the per-stream CUDA context (stream, workspace,
// conv algorithm cache), the same on a device and in the kernel interpreter; only the
// library handles differ (library_handles.cpp, interpreter/library_handles.cpp).
#include "engine/cuda/context.h"

#include "engine/core/allocator.h"
#include "engine/core/cuda_check.h"
#include "engine/cuda/conv_autotune.h"

namespace ember {

CudaContext::CudaContext(const CudaContextOptions& options)
    : stream(options.stream),
      workspace_bytes(options.workspace_bytes),
      cudnn_benchmark(options.cudnn_benchmark),
      allow_tf32(options.allow_tf32),
      deterministic(options.deterministic),
      conv_algorithms(std::make_unique<ConvAlgoCache>()) {
    create_library_handles(*this);
    if (workspace_bytes > 0) workspace = device_allocator().allocate(workspace_bytes);
}

CudaContext::~CudaContext() {
    if (workspace) device_allocator().free(workspace);
    destroy_library_handles(*this);
}

void CudaContext::synchronize() const {
    EMBER_CUDA_CHECK(cudaStreamSynchronize(stream));
}

}  // namespace ember
