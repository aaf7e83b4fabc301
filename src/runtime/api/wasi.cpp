// Host side of the WASI preview-1 subset (module "wasi_snapshot_preview1") that wasi-libc
// programs need: args, an empty environment, clocks, random, stdout/stderr (captured per
// instance as log lines), proc_exit and sched_yield. There is no file system and no sockets:
// fd calls on other descriptors return EBADF, everything else ENOSYS. Bad guest pointers are
// EFAULT here (WASI's convention) rather than PITH_ERR_BAD_POINTER.
#include <sys/random.h>

#include <ctime>

#include "runtime/api/host_call.h"

using namespace pith::runtime;
using namespace pith::runtime::api;

namespace {

constexpr u32 kSuccess = 0, kEBadF = 8, kEFault = 21, kEInval = 28, kENoSys = 52, kESPipe = 70;

template <typename Body>
u32 wasi_call(void* c, Body body) {
  return host_call(c, [&](Instance& inst) -> pith_status_t {
    try {
      return static_cast<pith_status_t>(body(inst));
    } catch (const GuestError&) {
      return static_cast<pith_status_t>(kEFault);
    }
  });
}

// argv / environ layout: pointer array at `ptrs`, NUL-terminated strings packed at `buf`.
u32 write_strings(Instance& inst, const std::vector<std::string>& v, u32 ptrs, u32 buf) {
  GuestMemory mem(inst);
  size_t total = 0;
  for (const auto& s : v) total += s.size() + 1;
  mem.bytes(ptrs, v.size() * 4ull);
  mem.bytes(buf, total);
  for (size_t i = 0; i < v.size(); ++i) {
    mem.store<uint32_t>(ptrs + 4 * static_cast<u32>(i), buf);
    std::memcpy(mem.bytes(buf, v[i].size() + 1), v[i].c_str(), v[i].size() + 1);
    buf += static_cast<u32>(v[i].size() + 1);
  }
  return kSuccess;
}

bool clock_for(u32 id, clockid_t* out) {
  switch (id) {
    case 0:
      *out = CLOCK_REALTIME;
      return true;
    case 1:
      *out = CLOCK_MONOTONIC;
      return true;
    case 2:
      *out = CLOCK_PROCESS_CPUTIME_ID;
      return true;
    case 3:
      *out = CLOCK_THREAD_CPUTIME_ID;
      return true;
    default:
      return false;
  }
}

}  // namespace

#define W(name) Z_wasi_snapshot_preview1Z_##name
using Ctx = Z_wasi_snapshot_preview1_instance_t;

extern "C" {

u32 W(args_get)(Ctx* c, u32 argv, u32 buf) {
  return wasi_call(c, [&](Instance& inst) { return write_strings(inst, inst.args(), argv, buf); });
}

u32 W(args_sizes_get)(Ctx* c, u32 argc_out, u32 size_out) {
  return wasi_call(c, [&](Instance& inst) {
    GuestMemory mem(inst);
    size_t total = 0;
    for (const auto& s : inst.args()) total += s.size() + 1;
    mem.bytes(argc_out, 4);
    mem.bytes(size_out, 4);
    mem.store<uint32_t>(argc_out, static_cast<uint32_t>(inst.args().size()));
    mem.store<uint32_t>(size_out, static_cast<uint32_t>(total));
    return kSuccess;
  });
}

u32 W(environ_get)(Ctx* c, u32, u32) {
  return wasi_call(c, [&](Instance&) { return kSuccess; });
}

u32 W(environ_sizes_get)(Ctx* c, u32 count_out, u32 size_out) {
  return wasi_call(c, [&](Instance& inst) {
    GuestMemory mem(inst);
    mem.bytes(count_out, 4);
    mem.bytes(size_out, 4);
    mem.store<uint32_t>(count_out, 0);
    mem.store<uint32_t>(size_out, 0);
    return kSuccess;
  });
}

u32 W(clock_res_get)(Ctx* c, u32 id, u32 out) {
  return wasi_call(c, [&](Instance& inst) {
    clockid_t clk;
    if (!clock_for(id, &clk)) return kEInval;
    timespec ts{};
    clock_getres(clk, &ts);
    GuestMemory(inst).store<uint64_t>(out, uint64_t(ts.tv_sec) * 1000000000ull + ts.tv_nsec);
    return kSuccess;
  });
}

u32 W(clock_time_get)(Ctx* c, u32 id, u64, u32 out) {
  return wasi_call(c, [&](Instance& inst) {
    clockid_t clk;
    if (!clock_for(id, &clk)) return kEInval;
    timespec ts{};
    clock_gettime(clk, &ts);
    GuestMemory(inst).store<uint64_t>(out, uint64_t(ts.tv_sec) * 1000000000ull + ts.tv_nsec);
    return kSuccess;
  });
}

u32 W(fd_write)(Ctx* c, u32 fd, u32 iovs, u32 iovs_len, u32 nwritten) {
  return wasi_call(c, [&](Instance& inst) {
    if (fd != 1 && fd != 2) return kEBadF;
    GuestMemory mem(inst);
    if (iovs_len > 1024) return kEInval;
    mem.bytes(iovs, iovs_len * 8ull);
    mem.bytes(nwritten, 4);
    uint64_t total = 0;
    for (u32 i = 0; i < iovs_len; ++i) {
      u32 base = mem.load<uint32_t>(iovs + 8 * i);
      u32 len = mem.load<uint32_t>(iovs + 8 * i + 4);
      inst.write_stdio(static_cast<int>(fd), mem.string(base, len));
      total += len;
    }
    mem.store<uint32_t>(nwritten, static_cast<uint32_t>(total));
    return kSuccess;
  });
}

u32 W(fd_fdstat_get)(Ctx* c, u32 fd, u32 out) {
  return wasi_call(c, [&](Instance& inst) {
    if (fd > 2) return kEBadF;
    // fdstat: u8 filetype, u16 flags, u64 rights_base, u64 rights_inheriting (24 bytes).
    GuestMemory mem(inst);
    uint8_t* p = mem.bytes(out, 24);
    std::memset(p, 0, 24);
    p[0] = 2;  // character device
    uint64_t rights = fd == 0 ? 2 /* fd_read */ : 64 /* fd_write */;
    std::memcpy(p + 8, &rights, 8);
    return kSuccess;
  });
}

u32 W(fd_seek)(Ctx* c, u32 fd, u64, u32, u32) {
  return wasi_call(c, [&](Instance&) { return fd <= 2 ? kESPipe : kEBadF; });
}

u32 W(fd_close)(Ctx* c, u32) {
  return wasi_call(c, [&](Instance&) { return kEBadF; });
}

u32 W(fd_read)(Ctx* c, u32 fd, u32, u32, u32 nread) {
  return wasi_call(c, [&](Instance& inst) {
    if (fd != 0) return kEBadF;
    GuestMemory(inst).store<uint32_t>(nread, 0);  // stdin is empty: use pith_msg_receive
    return kSuccess;
  });
}

u32 W(fd_prestat_get)(Ctx* c, u32, u32) {
  return wasi_call(c, [&](Instance&) { return kEBadF; });  // no preopened directories
}

u32 W(random_get)(Ctx* c, u32 buf, u32 len) {
  return wasi_call(c, [&](Instance& inst) {
    uint8_t* p = GuestMemory(inst).bytes(buf, len);
    size_t done = 0;
    while (done < len) {
      ssize_t r = getrandom(p + done, len - done, 0);
      if (r <= 0) return kEInval;
      done += static_cast<size_t>(r);
    }
    return kSuccess;
  });
}

u32 W(sched_yield)(Ctx* c) {
  return wasi_call(c, [&](Instance& inst) {
    inst.yield_now();
    return kSuccess;
  });
}

void W(proc_exit)(Ctx* c, u32 code) {
  host_call(c, [&](Instance& inst) -> pith_status_t {
    inst.exec().exit_code = static_cast<int>(code);
    if (!inst.exec().kill_pending) inst.exec().kill_pending = static_cast<int>(TrapCode::Exit);
    return PITH_OK;
  });
  // Native tier: host_call raised the pending exit at its boundary and did not return. The
  // interpreter tier returns here; its adapter ends the guest with the pending exit.
  if (!instance_of(c).exec().interpreted) __builtin_unreachable();
}

// Everything else: no file system, no sockets, no signals, no polling.
#define PITH_WASI_STUB(name, result, ...)                   \
  u32 W(name)(Ctx * c, __VA_ARGS__) {                       \
    return wasi_call(c, [&](Instance&) { return result; }); \
  }
PITH_WASI_STUB(fd_advise, kEBadF, u32, u64, u64, u32)
PITH_WASI_STUB(fd_allocate, kEBadF, u32, u64, u64)
PITH_WASI_STUB(fd_datasync, kEBadF, u32)
PITH_WASI_STUB(fd_fdstat_set_flags, kEBadF, u32, u32)
PITH_WASI_STUB(fd_fdstat_set_rights, kEBadF, u32, u64, u64)
PITH_WASI_STUB(fd_filestat_get, kEBadF, u32, u32)
PITH_WASI_STUB(fd_filestat_set_size, kEBadF, u32, u64)
PITH_WASI_STUB(fd_filestat_set_times, kEBadF, u32, u64, u64, u32)
PITH_WASI_STUB(fd_pread, kEBadF, u32, u32, u32, u64, u32)
PITH_WASI_STUB(fd_prestat_dir_name, kEBadF, u32, u32, u32)
PITH_WASI_STUB(fd_pwrite, kEBadF, u32, u32, u32, u64, u32)
PITH_WASI_STUB(fd_readdir, kEBadF, u32, u32, u32, u64, u32)
PITH_WASI_STUB(fd_renumber, kEBadF, u32, u32)
PITH_WASI_STUB(fd_sync, kEBadF, u32)
PITH_WASI_STUB(fd_tell, kEBadF, u32, u32)
PITH_WASI_STUB(path_create_directory, kENoSys, u32, u32, u32)
PITH_WASI_STUB(path_filestat_get, kENoSys, u32, u32, u32, u32, u32)
PITH_WASI_STUB(path_filestat_set_times, kENoSys, u32, u32, u32, u32, u64, u64, u32)
PITH_WASI_STUB(path_link, kENoSys, u32, u32, u32, u32, u32, u32, u32)
PITH_WASI_STUB(path_open, kENoSys, u32, u32, u32, u32, u32, u64, u64, u32, u32)
PITH_WASI_STUB(path_readlink, kENoSys, u32, u32, u32, u32, u32, u32)
PITH_WASI_STUB(path_remove_directory, kENoSys, u32, u32, u32)
PITH_WASI_STUB(path_rename, kENoSys, u32, u32, u32, u32, u32, u32)
PITH_WASI_STUB(path_symlink, kENoSys, u32, u32, u32, u32, u32)
PITH_WASI_STUB(path_unlink_file, kENoSys, u32, u32, u32)
PITH_WASI_STUB(poll_oneoff, kENoSys, u32, u32, u32, u32)
PITH_WASI_STUB(proc_raise, kENoSys, u32)
PITH_WASI_STUB(sock_accept, kENoSys, u32, u32, u32)
PITH_WASI_STUB(sock_recv, kENoSys, u32, u32, u32, u32, u32, u32)
PITH_WASI_STUB(sock_send, kENoSys, u32, u32, u32, u32, u32)
PITH_WASI_STUB(sock_shutdown, kENoSys, u32, u32)
#undef PITH_WASI_STUB

}  // extern "C"
