# Every third-party dependency, found the CMake way. scripts/install-deps.sh installs
# the Debian packages that provide them.
find_package(CUDAToolkit 12.0 REQUIRED)   # CUDA::cudart cublas cublasLt cupti nvtx3
find_package(CUDNN REQUIRED)              # cmake/FindCUDNN.cmake -> CUDNN::cudnn
find_package(NCCL REQUIRED)               # cmake/FindNCCL.cmake  -> NCCL::nccl
find_package(Threads REQUIRED)
find_package(SQLite3 REQUIRED)            # SQLite::SQLite3
find_package(MPI REQUIRED COMPONENTS C)   # MPI::MPI_C (OpenMPI)
# ember::mpi: the C API only, also from C++ (OpenMPI's deprecated C++ bindings off).
add_library(ember_mpi INTERFACE)
add_library(ember::mpi ALIAS ember_mpi)
target_link_libraries(ember_mpi INTERFACE MPI::MPI_C)
target_compile_definitions(ember_mpi INTERFACE OMPI_SKIP_MPICXX=1 MPICH_SKIP_MPICXX=1)
find_package(CLI11 CONFIG REQUIRED)       # CLI11::CLI11
find_package(nlohmann_json CONFIG REQUIRED)
find_package(fmt CONFIG REQUIRED)         # fmt::fmt
find_package(tomlplusplus CONFIG REQUIRED) # tomlplusplus::tomlplusplus (trainer configs)
find_package(PNG REQUIRED)                # PNG::PNG
find_package(ZLIB REQUIRED)               # ZLIB::ZLIB (gzip IDX files, gzip traces)
find_package(simdjson CONFIG REQUIRED)    # simdjson::simdjson (the trace importers' streaming JSON)
# Protocol Buffers (libprotobuf-dev, protobuf-compiler): the Perfetto and pprof exports
# and TensorBoard event files, each from a schema file of ember's own (protobuf_generate).
find_package(Protobuf REQUIRED)           # protobuf::libprotobuf, protobuf::protoc
find_package(PkgConfig REQUIRED)
pkg_check_modules(OPENBLAS REQUIRED IMPORTED_TARGET openblas)  # PkgConfig::OPENBLAS
# oneDNN (libdnnl-dev): the CPU backend's fast convolutions. Found by header and library:
# Debian's dnnl-config.cmake also requires OpenCL (its GPU runtime), which the CPU
# primitives never use. Its CPU runtime is OpenMP (GNU libgomp), which the fast paths
# size and use too (engine/cpu/implementation.h).
find_path(DNNL_INCLUDE_DIR oneapi/dnnl/dnnl.hpp REQUIRED)
find_library(DNNL_LIBRARY dnnl REQUIRED)
add_library(ember_onednn INTERFACE)
add_library(ember::onednn ALIAS ember_onednn)
target_include_directories(ember_onednn SYSTEM INTERFACE ${DNNL_INCLUDE_DIR})
target_link_libraries(ember_onednn INTERFACE ${DNNL_LIBRARY})
find_package(OpenMP REQUIRED COMPONENTS CXX)  # OpenMP::OpenMP_CXX

if(EMBER_BUILD_VIEWER)
  find_package(glfw3 3.3 REQUIRED)         # glfw
  find_package(OpenGL REQUIRED)           # OpenGL::GL
  # Debian's libimgui.a already contains the GLFW and OpenGL3 backends.
  pkg_check_modules(IMGUI REQUIRED IMPORTED_TARGET imgui)  # PkgConfig::IMGUI
endif()

find_package(benchmark CONFIG REQUIRED)   # benchmark::benchmark (bench/)
if(EMBER_BUILD_TESTS)
  find_package(GTest CONFIG REQUIRED)     # GTest::gtest GTest::gtest_main GTest::gmock
  include(GoogleTest)
endif()

message(STATUS "ember: CUDA ${CUDAToolkit_VERSION} (archs ${CMAKE_CUDA_ARCHITECTURES}), "
               "cuDNN ${CUDNN_VERSION}, NCCL ${NCCL_VERSION}, SQLite ${SQLite3_VERSION}")
