# ember_protobuf_library(<target> <file.proto>...): a static library of the C++ code protoc
# generates from ember's own schema files. Each file is named from the source root, so
# profiler/export/proto/x.proto becomes #include "profiler/export/proto/x.pb.h" (under
# <build>/generated). The generated code is compiled without ember's warning options.
function(ember_protobuf_library target)
  set(generated_root ${PROJECT_BINARY_DIR}/generated)
  set(sources)
  foreach(proto IN LISTS ARGN)
    get_filename_component(absolute ${proto} ABSOLUTE)
    file(RELATIVE_PATH relative ${PROJECT_SOURCE_DIR} ${absolute})
    string(REGEX REPLACE "\\.proto$" "" stem ${relative})
    add_custom_command(
      OUTPUT ${generated_root}/${stem}.pb.cc ${generated_root}/${stem}.pb.h
      COMMAND ${CMAKE_COMMAND} -E make_directory ${generated_root}
      COMMAND protobuf::protoc --cpp_out=${generated_root} -I ${PROJECT_SOURCE_DIR} ${absolute}
      DEPENDS ${absolute} protobuf::protoc
      COMMENT "protoc ${relative}"
      VERBATIM)
    list(APPEND sources ${generated_root}/${stem}.pb.cc)
  endforeach()
  add_library(${target} STATIC ${sources})
  target_include_directories(${target} SYSTEM PUBLIC ${generated_root})
  target_link_libraries(${target} PUBLIC protobuf::libprotobuf)
endfunction()
