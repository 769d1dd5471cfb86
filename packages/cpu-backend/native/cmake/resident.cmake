# embedstack_resident_addon(<target>): the addon stays mapped until the process exits.
# Node unloads (dlcloses) an addon when the last environment that loaded it ends, for
# example when every worker thread that required it has terminated. The addon's thread
# pool is process-wide and outlives any one environment: its idle threads would go on
# running code that is no longer mapped, and crash the process. `-z nodelete` makes
# dlclose keep the library, so the pool and its code live as long as the process.
function(embedstack_resident_addon target)
  if(CMAKE_SYSTEM_NAME STREQUAL "Linux")
    target_link_options(${target} PRIVATE -Wl,-z,nodelete)
  endif()
endfunction()
