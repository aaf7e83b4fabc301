// Error reporting of the kernel launchers, kept out of the .cu files so nvcc never sees fmt:
// a bad argument or a failed launch becomes a pith::Error naming the kernel.
#pragma once

namespace pith::cuda {

// Throws pith::Error("<kernel>: <message>") unless ok.
void require(bool ok, const char* kernel, const char* message);
// Throws pith::Error naming the kernel if the last launch failed (cudaGetLastError).
void check_launch(const char* kernel);

}  // namespace pith::cuda
