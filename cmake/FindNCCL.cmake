# FindNCCL: locates NCCL (headers and library) next to the CUDA toolkit or on the
# system paths. Defines NCCL_FOUND, NCCL_VERSION and the imported target NCCL::nccl.
include(${CMAKE_CURRENT_LIST_DIR}/EmberFindNvidiaLibrary.cmake)
ember_find_nvidia_library(NCCL nccl nccl.h NCCL_MAJOR NCCL_MINOR NCCL_PATCH NCCL::nccl)
