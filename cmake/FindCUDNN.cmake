# FindCUDNN: locates cuDNN (headers and library) next to the CUDA toolkit or on the
# system paths. Defines CUDNN_FOUND, CUDNN_VERSION and the imported target CUDNN::cudnn.
include(${CMAKE_CURRENT_LIST_DIR}/EmberFindNvidiaLibrary.cmake)
ember_find_nvidia_library(CUDNN cudnn cudnn_version.h CUDNN_MAJOR CUDNN_MINOR CUDNN_PATCHLEVEL CUDNN::cudnn)
