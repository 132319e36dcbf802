# Warnings and sanitizers shared by every ember target. Targets opt in with
# target_link_libraries(<t> PRIVATE ember::options).
add_library(ember_options INTERFACE)
add_library(ember::options ALIAS ember_options)
target_compile_options(ember_options INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wno-unused-parameter>
  $<$<COMPILE_LANGUAGE:CUDA>:--expt-relaxed-constexpr -Xcompiler=-Wall>)
target_include_directories(ember_options INTERFACE
  ${PROJECT_BINARY_DIR}/generated ${PROJECT_SOURCE_DIR})

if(EMBER_SANITIZE)
  # nvcc forwards host flags with -Xcompiler; device code is not instrumented.
  set(_san -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  target_compile_options(ember_options INTERFACE
    $<$<COMPILE_LANGUAGE:CXX>:${_san}>
    $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-fsanitize=address,-fsanitize=undefined,-fno-omit-frame-pointer>)
  target_link_options(ember_options INTERFACE ${_san})
endif()
