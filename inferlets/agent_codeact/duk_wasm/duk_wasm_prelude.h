/* Forced into duktape.c (-include) when it is built for the agent_codeact inferlet.
 *
 * Duktape throws by longjmp()ing to the innermost catchpoint (duk_error_longjmp.c). wasm32-wasi
 * has no setjmp/longjmp without the exception-handling proposal, which pith's runtime does not
 * enable, so: every catchpoint's setjmp "returns 0" (the normal path), and a throw clears the
 * catchpoint and re-enters duk_err_longjmp(), whose no-catchpoint path formats the error
 * ("uncaught: ...") and calls the heap's fatal handler. The embedder's fatal handler never
 * returns (it continues the inferlet on top of the abandoned stack). Consequence: a JavaScript
 * error cannot be caught inside JavaScript (try/catch does not see it); it ends the evaluation.
 *
 * `thr` is the duk_hthread in scope at the single DUK_LONGJMP use of Duktape 2.7.0; with another
 * version this fails to compile rather than misbehave. */
#define DUK_JMPBUF_TYPE int
#define DUK_SETJMP(jb) 0
#define DUK_LONGJMP(jb) (thr->heap->lj.jmpbuf_ptr = NULL, duk_err_longjmp(thr))
