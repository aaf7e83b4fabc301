/* setjmp.h stand-in for building Duktape for wasm32-wasi: wasi-libc (Debian 0.0~git20220510) has
 * no setjmp.h, and wasm32 without the exception-handling proposal has no way to unwind the stack.
 * duk_config.h includes this header unconditionally; duk_wasm_prelude.h defines the DUK_SETJMP
 * family instead (see ../README.md, "setjmp/longjmp"). */
#ifndef PITH_DUK_WASM_SETJMP_H_
#define PITH_DUK_WASM_SETJMP_H_
#endif
