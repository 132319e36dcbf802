# ember_find_nvidia_library(<Package> <library> <version header> <major> <minor> <patch>
#                           <imported target>)
# What FindCUDNN and FindNCCL share: the header and the library next to the CUDA toolkit,
# under <Package>_ROOT (variable or environment) or on the system paths; the version
# from the header's three #defines; <Package>_FOUND through
# find_package_handle_standard_args; and a shared imported target. A macro, so the
# results land in the scope of the find_package() call.
macro(ember_find_nvidia_library package library header major minor patch target)
  find_path(${package}_INCLUDE_DIR ${header}
    HINTS ${${package}_ROOT} ENV ${package}_ROOT ${CUDAToolkit_INCLUDE_DIRS} ${CUDAToolkit_LIBRARY_ROOT}
    PATH_SUFFIXES include)
  find_library(${package}_LIBRARY ${library}
    HINTS ${${package}_ROOT} ENV ${package}_ROOT ${CUDAToolkit_LIBRARY_DIR} ${CUDAToolkit_LIBRARY_ROOT}
    PATH_SUFFIXES lib64 lib)

  if(${package}_INCLUDE_DIR AND EXISTS ${${package}_INCLUDE_DIR}/${header})
    file(STRINGS ${${package}_INCLUDE_DIR}/${header} _ember_version_lines
      REGEX "#define (${major}|${minor}|${patch}) +[0-9]+")
    string(REGEX REPLACE ".*${major} +([0-9]+).*" "\\1" _ember_major "${_ember_version_lines}")
    string(REGEX REPLACE ".*${minor} +([0-9]+).*" "\\1" _ember_minor "${_ember_version_lines}")
    string(REGEX REPLACE ".*${patch} +([0-9]+).*" "\\1" _ember_patch "${_ember_version_lines}")
    set(${package}_VERSION "${_ember_major}.${_ember_minor}.${_ember_patch}")
  endif()

  include(FindPackageHandleStandardArgs)
  find_package_handle_standard_args(${package}
    REQUIRED_VARS ${package}_LIBRARY ${package}_INCLUDE_DIR VERSION_VAR ${package}_VERSION)

  if(${package}_FOUND AND NOT TARGET ${target})
    add_library(${target} SHARED IMPORTED)
    set_target_properties(${target} PROPERTIES
      IMPORTED_LOCATION ${${package}_LIBRARY}
      INTERFACE_INCLUDE_DIRECTORIES ${${package}_INCLUDE_DIR})
  endif()
  mark_as_advanced(${package}_INCLUDE_DIR ${package}_LIBRARY)
endmacro()
