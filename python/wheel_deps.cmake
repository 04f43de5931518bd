# Included by the top-level CMakeLists.txt when FKV_PYTHON=ON (the wheel build): what libfkv
# links so that the wheel needs nothing from the system at import time.
#  - spdlog header-only, with fmt header-only (Debian's spdlog::spdlog_header_only links the
#    shared libfmt, so the target is assembled here);
#  - xxHash inline (XXH_INLINE_ALL: every function static in the one translation unit using it);
#  - libfkv static, linked into the extension, which carries libstdc++ statically.
find_package(fmt REQUIRED)
get_target_property(_fkv_spdlog_inc spdlog::spdlog_header_only INTERFACE_INCLUDE_DIRECTORIES)
add_library(fkv_spdlog_header_only INTERFACE)
target_include_directories(fkv_spdlog_header_only INTERFACE ${_fkv_spdlog_inc})
target_compile_definitions(fkv_spdlog_header_only INTERFACE SPDLOG_FMT_EXTERNAL)
target_link_libraries(fkv_spdlog_header_only INTERFACE fmt::fmt-header-only Threads::Threads)

add_library(fkv_xxhash_inline INTERFACE)
target_include_directories(fkv_xxhash_inline INTERFACE ${XXHASH_INCLUDE_DIR})
target_compile_definitions(fkv_xxhash_inline INTERFACE XXH_INLINE_ALL)

set(FKV_SPDLOG fkv_spdlog_header_only)
set(FKV_XXHASH fkv_xxhash_inline)
set(FKV_LIBRARY_TYPE STATIC)
set(FKV_BUILD_TESTS OFF CACHE BOOL "" FORCE)
# The static libfkv names them in its export set (the wheel installs only component "python").
install(TARGETS fkv_spdlog_header_only fkv_xxhash_inline EXPORT fkvTargets)
