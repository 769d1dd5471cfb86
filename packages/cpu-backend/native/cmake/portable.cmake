# embedstack_portable_addon(<target>): with EMBEDSTACK_PORTABLE=ON (scripts/prebuild.mjs
# sets it for the prebuilt binaries of cpu-backend and cuda-backend's host mode), a
# Linux addon carries its C++ runtime (no GLIBCXX version asked of the user's system;
# its symbols stay hidden), has no debug symbols, and needs glibc >= 2.34
# (binding/portable_glibc.cc); libgcc_s stays shared (every Linux has it).
option(EMBEDSTACK_PORTABLE "Link the C++ runtime statically and strip (prebuilt binaries)" OFF)
set(EMBEDSTACK_PORTABLE_GLIBC ${CMAKE_CURRENT_LIST_DIR}/../binding/portable_glibc.cc)
function(embedstack_portable_addon target)
  if(EMBEDSTACK_PORTABLE AND CMAKE_SYSTEM_NAME STREQUAL "Linux")
    target_sources(${target} PRIVATE ${EMBEDSTACK_PORTABLE_GLIBC})
    target_link_options(${target} PRIVATE -static-libstdc++ -Wl,--exclude-libs,ALL -s)
  endif()
endfunction()
