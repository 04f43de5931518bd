# Included by the top-level CMakeLists.txt when FKV_PYTHON=ON (the wheel build): what libfkv
# links so that the wheel needs nothing from the system at import time.
#  - spdlog header-only, with fmt header-only (Debian's spdlog::spdlog_header_only links the
#    shared libfmt, so the target is assembled here);
#  - xxHash inline (XXH_INLINE_ALL: every function static in the one translation unit using it);
#  - libfkv static, linked into the extension and into the wheel's fkv-jit CLI, which carry the
#    C++ runtime statically.
find_package(fmt REQUIRED)
get_target_property(_fkv_spdlog_inc spdlog::spdlog_header_only INTERFACE_INCLUDE_DIRECTORIES)
add_library(fkv_spdlog_header_only INTERFACE)
target_include_directories(fkv_spdlog_header_only INTERFACE ${_fkv_spdlog_inc})
target_compile_definitions(fkv_spdlog_header_only INTERFACE SPDLOG_FMT_EXTERNAL)
target_link_libraries(fkv_spdlog_header_only INTERFACE fmt::fmt-header-only Threads::Threads)

add_library(fkv_xxhash_inline INTERFACE)
target_include_directories(fkv_xxhash_inline INTERFACE ${XXHASH_INCLUDE_DIR})
target_compile_definitions(fkv_xxhash_inline INTERFACE XXH_INLINE_ALL)

# A compiler with its own C library headers (the manylinux build: zig targeting glibc 2.28,
# scripts/test-wheel.sh) must not see /usr/include, which holds the build machine's glibc 2.36
# headers: the header-only libraries found there (nlohmann/json, spdlog, fmt, CLI11, xxHash) are
# reached through a folder of links to just their headers.
if(NOT "/usr/include" IN_LIST CMAKE_CXX_IMPLICIT_INCLUDE_DIRECTORIES)
  set(_fkv_staged ${CMAKE_BINARY_DIR}/staged-include)
  file(MAKE_DIRECTORY ${_fkv_staged})
  foreach(_h nlohmann spdlog fmt CLI xxhash.h xxh3.h)
    if(EXISTS /usr/include/${_h} AND NOT EXISTS ${_fkv_staged}/${_h})
      file(CREATE_LINK /usr/include/${_h} ${_fkv_staged}/${_h} SYMBOLIC)
    endif()
  endforeach()
  foreach(_t nlohmann_json::nlohmann_json CLI11::CLI11 fmt::fmt-header-only fkv_spdlog_header_only
             fkv_xxhash_inline)
    get_target_property(_inc ${_t} INTERFACE_INCLUDE_DIRECTORIES)
    if(_inc)
      list(TRANSFORM _inc REPLACE "^/usr/include/?$" "$<BUILD_INTERFACE:${_fkv_staged}>")
      set_target_properties(${_t} PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${_inc}")
    endif()
  endforeach()
endif()

set(FKV_SPDLOG fkv_spdlog_header_only)
set(FKV_XXHASH fkv_xxhash_inline)
set(FKV_LIBRARY_TYPE STATIC)
set(FKV_BUILD_TESTS OFF CACHE BOOL "" FORCE)
set(FKV_BUILD_BENCH OFF CACHE BOOL "" FORCE)
# The static libfkv names them in its export set (the wheel installs only component "python").
install(TARGETS fkv_spdlog_header_only fkv_xxhash_inline EXPORT fkvTargets)
