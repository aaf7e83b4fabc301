// The table of every function the host provides to guests: import module "pith" (the ABI in
// sdk/include/pith/abi.h, one row per function, wasm-level types) and the WASI preview-1 subset
// module "wasi_snapshot_preview1". It drives three things, so they cannot drift apart:
//  - the C prototypes of the host definitions (src/runtime/api/*.cpp include this header; a
//    definition with a different signature is a compile error: conflicting extern "C"),
//  - the prototypes the native compiler adds to each module's shim, so a module importing a
//    function with the wrong signature fails at upload with a C type error, not at run time,
//  - the list of known imports, so an unknown import is rejected at upload by name.
// wasm2c names an import 'mod' 'name' as Z_<mod>Z_<name> and passes the import-module instance
// pointer first; pith passes the Instance for both modules.
#pragma once

#include <stdint.h>

#ifndef WASM_RT_CORE_TYPES_DEFINED
#define WASM_RT_CORE_TYPES_DEFINED
typedef uint8_t u8;
typedef int8_t s8;
typedef uint16_t u16;
typedef int16_t s16;
typedef uint32_t u32;
typedef int32_t s32;
typedef uint64_t u64;
typedef int64_t s64;
typedef float f32;
typedef double f64;
#endif

// X(name, result, (params after the instance pointer)); guest pointers are u32.
#define PITH_HOST_IMPORTS(X)                                                \
  X(arg_count, u32, (u32))                                                  \
  X(arg_get, u32, (u32, u32, u32, u32))                                     \
  X(instance_id, u32, (u32))                                                \
  X(time_now, u32, (u32))                                                   \
  X(yield, u32, ())                                                         \
  X(log, u32, (u32, u32, u32))                                              \
  X(msg_send, u32, (u32, u32))                                              \
  X(msg_receive, u32, (u32))                                                \
  X(topic_broadcast, u32, (u32, u32, u32, u32))                             \
  X(topic_subscribe, u32, (u32, u32, u32))                                  \
  X(topic_next, u32, (u32, u32))                                            \
  X(topic_unsubscribe, u32, (u32))                                          \
  X(future_poll, u32, (u32, u32))                                           \
  X(future_wait, u32, (u32))                                                \
  X(future_wait_any, u32, (u32, u32, u32))                                  \
  X(future_result, u32, (u32, u32, u32, u32))                               \
  X(future_drop, u32, (u32))                                                \
  X(store_get, u32, (u32, u32, u32, u32, u32))                              \
  X(store_set, u32, (u32, u32, u32, u32))                                   \
  X(store_delete, u32, (u32, u32))                                          \
  X(store_exists, u32, (u32, u32, u32))                                     \
  X(http_get, u32, (u32, u32, u32))                                         \
  X(http_post, u32, (u32, u32, u32, u32, u32))                              \
  X(model_list, u32, (u32, u32, u32))                                       \
  X(model_open, u32, (u32, u32, u32))                                       \
  X(model_traits, u32, (u32, u32, u32, u32))                                \
  X(model_info, u32, (u32, u32))                                            \
  X(tokenize, u32, (u32, u32, u32, u32, u32, u32))                          \
  X(detokenize, u32, (u32, u32, u32, u32, u32, u32))                        \
  X(vocab_get, u32, (u32, u32, u32, u32))                                   \
  X(vocab_special, u32, (u32, u32, u32, u32))                               \
  X(vocab_trie, u32, (u32, u32, u32, u32))                                  \
  X(queue_create, u32, (u32, u32))                                          \
  X(queue_destroy, u32, (u32))                                              \
  X(queue_synchronize, u32, (u32, u32))                                     \
  X(queue_set_priority, u32, (u32, u32))                                    \
  X(queue_set_adapter, u32, (u32, u32))                                     \
  X(adapter_open, u32, (u32, u32, u32, u32))                                \
  X(kvpage_policy, u32, (u32, u32))                                         \
  X(kvpage_alloc, u32, (u32, u32, u32))                                     \
  X(kvpage_dealloc, u32, (u32, u32, u32))                                   \
  X(emb_alloc, u32, (u32, u32, u32))                                        \
  X(emb_dealloc, u32, (u32, u32, u32))                                      \
  X(kvpage_copy, u32, (u32, u32, u32, u32, u32, u32))                       \
  X(kvpage_mask, u32, (u32, u32, u32, u32))                                 \
  X(kvpage_export, u32, (u32, u32, u32, u32, u32))                          \
  X(kvpage_unexport, u32, (u32, u32, u32))                                  \
  X(kvpage_import, u32, (u32, u32, u32, u32, u32, u32))                     \
  X(prefix_match, u32, (u32, u32, u32, u32, u32, u32, u32))                 \
  X(prefix_insert, u32, (u32, u32, u32, u32, u32))                          \
  X(state_alloc, u32, (u32, u32, u32))                                      \
  X(state_dealloc, u32, (u32, u32, u32))                                    \
  X(state_copy, u32, (u32, u32, u32))                                       \
  X(queue_set_state, u32, (u32, u32))                                       \
  X(state_export, u32, (u32, u32, u32, u32))                                \
  X(state_unexport, u32, (u32, u32, u32))                                   \
  X(state_import, u32, (u32, u32, u32, u32))                                \
  X(prefix_match_state, u32, (u32, u32, u32, u32, u32, u32, u32, u32, u32)) \
  X(prefix_insert_state, u32, (u32, u32, u32, u32, u32, u32))               \
  X(embed_txt, u32, (u32, u32, u32, u32, u32))                              \
  X(embed_img, u32, (u32, u32, u32, u32, u32))                              \
  X(forward, u32, (u32, u32))                                               \
  X(forward_with_adapter, u32, (u32, u32, u32))                             \
  X(next_dist, u32, (u32, u32, u32, u32))                                   \
  X(forward_tokens, u32, (u32, u32, u32))                                   \
  X(forward_tokens_allowed, u32, (u32, u32, u32, u32, u32))                 \
  X(forward_tokens_adjusted, u32, (u32, u32, u32, u32, u32, u32, u32))

// WASI preview 1: the full function list, so any wasi-libc program links; unsupported ones
// return ENOSYS/EBADF (see api/wasi.cpp).
#define PITH_WASI_IMPORTS(X)                                           \
  X(args_get, u32, (u32, u32))                                         \
  X(args_sizes_get, u32, (u32, u32))                                   \
  X(environ_get, u32, (u32, u32))                                      \
  X(environ_sizes_get, u32, (u32, u32))                                \
  X(clock_res_get, u32, (u32, u32))                                    \
  X(clock_time_get, u32, (u32, u64, u32))                              \
  X(fd_advise, u32, (u32, u64, u64, u32))                              \
  X(fd_allocate, u32, (u32, u64, u64))                                 \
  X(fd_close, u32, (u32))                                              \
  X(fd_datasync, u32, (u32))                                           \
  X(fd_fdstat_get, u32, (u32, u32))                                    \
  X(fd_fdstat_set_flags, u32, (u32, u32))                              \
  X(fd_fdstat_set_rights, u32, (u32, u64, u64))                        \
  X(fd_filestat_get, u32, (u32, u32))                                  \
  X(fd_filestat_set_size, u32, (u32, u64))                             \
  X(fd_filestat_set_times, u32, (u32, u64, u64, u32))                  \
  X(fd_pread, u32, (u32, u32, u32, u64, u32))                          \
  X(fd_prestat_get, u32, (u32, u32))                                   \
  X(fd_prestat_dir_name, u32, (u32, u32, u32))                         \
  X(fd_pwrite, u32, (u32, u32, u32, u64, u32))                         \
  X(fd_read, u32, (u32, u32, u32, u32))                                \
  X(fd_readdir, u32, (u32, u32, u32, u64, u32))                        \
  X(fd_renumber, u32, (u32, u32))                                      \
  X(fd_seek, u32, (u32, u64, u32, u32))                                \
  X(fd_sync, u32, (u32))                                               \
  X(fd_tell, u32, (u32, u32))                                          \
  X(fd_write, u32, (u32, u32, u32, u32))                               \
  X(path_create_directory, u32, (u32, u32, u32))                       \
  X(path_filestat_get, u32, (u32, u32, u32, u32, u32))                 \
  X(path_filestat_set_times, u32, (u32, u32, u32, u32, u64, u64, u32)) \
  X(path_link, u32, (u32, u32, u32, u32, u32, u32, u32))               \
  X(path_open, u32, (u32, u32, u32, u32, u32, u64, u64, u32, u32))     \
  X(path_readlink, u32, (u32, u32, u32, u32, u32, u32))                \
  X(path_remove_directory, u32, (u32, u32, u32))                       \
  X(path_rename, u32, (u32, u32, u32, u32, u32, u32))                  \
  X(path_symlink, u32, (u32, u32, u32, u32, u32))                      \
  X(path_unlink_file, u32, (u32, u32, u32))                            \
  X(poll_oneoff, u32, (u32, u32, u32, u32))                            \
  X(proc_exit, void, (u32))                                            \
  X(proc_raise, u32, (u32))                                            \
  X(sched_yield, u32, ())                                              \
  X(random_get, u32, (u32, u32))                                       \
  X(sock_accept, u32, (u32, u32, u32))                                 \
  X(sock_recv, u32, (u32, u32, u32, u32, u32, u32))                    \
  X(sock_send, u32, (u32, u32, u32, u32, u32))                         \
  X(sock_shutdown, u32, (u32, u32))

struct Z_pith_instance_t;
struct Z_wasi_snapshot_preview1_instance_t;

#define PITH_PARAMS_(...) __VA_OPT__(, ) __VA_ARGS__
#define PITH_PARAMS(p) PITH_PARAMS_ p

#ifdef __cplusplus
extern "C" {
#endif
#define PITH_DECLARE_HOST(name, ret, params) \
  ret Z_pithZ_##name(struct Z_pith_instance_t* PITH_PARAMS(params));
#define PITH_DECLARE_WASI(name, ret, params) \
  ret Z_wasi_snapshot_preview1Z_##name(      \
      struct Z_wasi_snapshot_preview1_instance_t* PITH_PARAMS(params));
PITH_HOST_IMPORTS(PITH_DECLARE_HOST)
PITH_WASI_IMPORTS(PITH_DECLARE_WASI)
#undef PITH_DECLARE_HOST
#undef PITH_DECLARE_WASI
#ifdef __cplusplus
}
#endif
