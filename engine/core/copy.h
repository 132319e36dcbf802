// copy.h: copying tensor contents between devices (host <-> device, device <->
// device, host <-> host). Same dtype and element count; layouts must match (the bytes
// are copied as they are: use convert_layout to reorder).
#pragma once

#include "engine/core/tensor.h"

#include <cuda_runtime_api.h>

namespace ember {

// Asynchronous on `stream` when a device is involved (pinned host memory makes H2D/D2H
// truly asynchronous); a plain memcpy for host-to-host.
void copy_tensor(const Tensor& src, const Tensor& dst, cudaStream_t stream = nullptr);

}  // namespace ember
