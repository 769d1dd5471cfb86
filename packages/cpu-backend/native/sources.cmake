# Source lists of the native CPU backend, included by CMakeLists.txt here and by
# the CUDA backend's build (packages/cuda-backend), which compiles the backend-
# independent parts too: the Table base and config checks, the planned ops, the
# thread pool, memory and errors (EMBEDSTACK_COMMON_SOURCES), and the N-API layer
# without the module entry (EMBEDSTACK_BINDING_SOURCES). A file added to either
# list is picked up by both builds.
set(EMBEDSTACK_NATIVE_DIR ${CMAKE_CURRENT_LIST_DIR})

set(EMBEDSTACK_COMMON_SOURCES
    ${EMBEDSTACK_NATIVE_DIR}/src/combine.cc
    ${EMBEDSTACK_NATIVE_DIR}/src/combine_narrow.cc
    ${EMBEDSTACK_NATIVE_DIR}/src/combine_plan.cc
    ${EMBEDSTACK_NATIVE_DIR}/src/dedupe.cc
    ${EMBEDSTACK_NATIVE_DIR}/src/errors.cc
    ${EMBEDSTACK_NATIVE_DIR}/src/initializer.cc
    ${EMBEDSTACK_NATIVE_DIR}/src/memory.cc
    ${EMBEDSTACK_NATIVE_DIR}/src/optimizer.cc
    ${EMBEDSTACK_NATIVE_DIR}/src/planned_ops.cc
    ${EMBEDSTACK_NATIVE_DIR}/src/scores.cc
    ${EMBEDSTACK_NATIVE_DIR}/src/storage.cc
    ${EMBEDSTACK_NATIVE_DIR}/src/table.cc
    ${EMBEDSTACK_NATIVE_DIR}/src/thread_pool.cc)

# The CPU tables (this backend only).
set(EMBEDSTACK_CPU_TABLE_SOURCES
    ${EMBEDSTACK_NATIVE_DIR}/src/dynamic_admit.cc
    ${EMBEDSTACK_NATIVE_DIR}/src/dynamic_read.cc
    ${EMBEDSTACK_NATIVE_DIR}/src/dynamic_table.cc
    ${EMBEDSTACK_NATIVE_DIR}/src/dynamic_write.cc
    ${EMBEDSTACK_NATIVE_DIR}/src/key_index.cc
    ${EMBEDSTACK_NATIVE_DIR}/src/set_cache.cc
    ${EMBEDSTACK_NATIVE_DIR}/src/static_table.cc
    ${EMBEDSTACK_NATIVE_DIR}/src/table_factory.cc)

set(EMBEDSTACK_BINDING_SOURCES
    ${EMBEDSTACK_NATIVE_DIR}/binding/args.cc
    ${EMBEDSTACK_NATIVE_DIR}/binding/async_op.cc
    ${EMBEDSTACK_NATIVE_DIR}/binding/convert.cc
    ${EMBEDSTACK_NATIVE_DIR}/binding/op_args.cc
    ${EMBEDSTACK_NATIVE_DIR}/binding/plan_api.cc
    ${EMBEDSTACK_NATIVE_DIR}/binding/table_api.cc
    ${EMBEDSTACK_NATIVE_DIR}/binding/table_config.cc)

# The N-API layer of this backend's own parts (the set-associative cache).
set(EMBEDSTACK_CPU_BINDING_SOURCES
    ${EMBEDSTACK_NATIVE_DIR}/binding/cache_api.cc)

set(EMBEDSTACK_INCLUDE_DIRS ${EMBEDSTACK_NATIVE_DIR}/src ${EMBEDSTACK_NATIVE_DIR}/binding)
